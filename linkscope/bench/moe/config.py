"""What a `bench moe` run is asked to do, validated once at the edge (a picklable dataclass sent to every rank)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from linkscope.bench.config import RunOptions
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import HOST_BYTES_PER_MESSAGE, MAX_ITERS, MAX_WARMUP, check_number
from linkscope.model.comm.moe import MAX_EXPERTS, MAX_HIDDEN, MAX_TOKENS_PER_RANK, MOE_PRECISIONS, token_bytes

MAX_SEED = 2**31 - 1
"""`--seed`: numpy's and torch's generators take any such seed."""
MAX_SKEW = 10.0
"""`--skew`: Zipf exponents of real routers' expert loads stay near 1; at 10 one expert takes nearly every token."""


@dataclass
class MoeConfig:
    """One MoE dispatch and combine shape, timed `iters` times after `warmup` untimed rounds."""

    tokens_per_rank: int
    hidden: int
    topk: int
    experts: int
    skew: float = 0.0
    """0 = every expert equally likely; s > 0 = Zipf weights 1 / i**s over the experts' popularity ranks."""
    precision: str = "bf16"
    """Dispatch precision (fp8 carries its scales); combine is always bf16."""
    iters: int = 20
    warmup: int = 5
    seed: int = 0
    run: RunOptions = field(default_factory=RunOptions)

    def validated(self) -> MoeConfig:
        """A checked copy; raises UserError naming the first bad value."""
        for flag, value, top in (("--tokens-per-rank", self.tokens_per_rank, MAX_TOKENS_PER_RANK),
                                 ("--hidden", self.hidden, MAX_HIDDEN), ("--topk", self.topk, MAX_EXPERTS),
                                 ("--experts", self.experts, MAX_EXPERTS), ("-n/--iters", self.iters, MAX_ITERS)):
            check_number(value, flag, 1, top)
        check_number(self.warmup, "-w/--warmup", 0, MAX_WARMUP)
        check_number(self.skew, "--skew", 0, MAX_SKEW)
        check_number(self.seed, "--seed", 0, MAX_SEED)
        if self.topk > self.experts:
            raise UserError(f"--topk {self.topk} is larger than --experts {self.experts}")
        precision = self.precision.strip().lower()
        if precision not in MOE_PRECISIONS:
            raise UserError(f"--precision must be one of {', '.join(MOE_PRECISIONS)} (got '{self.precision}')")
        return replace(self, precision=precision, run=self.run.validated())

    @property
    def dispatch_bytes(self) -> int:
        """Bytes of one token copy on the way out (fp8 with its scales, or bf16; routing metadata included)."""
        return int(token_bytes(self.hidden, self.topk, self.precision)[0])

    @property
    def combine_bytes(self) -> int:
        """Bytes of one token copy on the way back (bf16)."""
        return int(token_bytes(self.hidden, self.topk, self.precision)[1])

    def host_bytes_per_rank(self, world: int) -> float:
        """What one CPU rank holds at the most: its send and receive buffers of both directions, with room for a
        rank that receives more than its share."""
        rows = float(self.tokens_per_rank) * min(self.topk, world)
        return rows * (self.dispatch_bytes + self.combine_bytes) * HOST_BYTES_PER_MESSAGE


def check_world(cfg: MoeConfig, world: int) -> None:
    """What only the rank count rules out, before any rank starts (exit 2, one line)."""
    if world < 2:
        raise UserError(f"bench moe needs at least 2 ranks to exchange tokens, but the run has {world}")
    if cfg.experts % world:
        raise UserError(f"--experts {cfg.experts} do not shard evenly over {world} ranks; give a multiple of "
                        f"{world} (or another --nproc)")
