"""What a `bench train` run is asked to do, validated once at the edge (a picklable dataclass sent to every rank)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from linkscope.bench.config import RunOptions
from linkscope.hardware.errors import UserError
from linkscope.model.calibration.train_fit import BENCH_MICRO_BATCH
from linkscope.hardware.limits import (MAX_BUCKET_MB, MAX_GPUS, MAX_ITERS, MAX_PROFILE_STEPS, MAX_REPEAT,
                                       MAX_WARMUP, check_number)
from linkscope.model.step.peft import TARGETS, Peft
from linkscope.model.step.transformer import ModelConfig

COMPRESSIONS = ("none", "fp16", "bf16", "powersgd")
RECOMPUTES = ("none", "full")
PRECISIONS = ("fp32", "bf16", "fp16")
SWEEP_KEYS = ("bucket-mb", "grad-compression")
DEFAULT_MICRO_BATCH = BENCH_MICRO_BATCH


@dataclass
class TrainConfig:
    """One training measurement: the model, the per-rank batch, the layout and how long to time it."""

    model: ModelConfig
    micro_batch: int = DEFAULT_MICRO_BATCH
    """Sequences per rank per step."""
    iters: int = 10
    warmup: int = 3
    repeat: int = 1
    fsdp: bool = False
    zero: int = 0
    """0 = DDP; 1, 2, 3 = FSDP2 (`fully_shard`); 1 and 2 keep the parameters after forward, 3 frees them."""
    tp: int = 1
    bucket_mb: float = 25.0
    overlap: bool = True
    grad_compression: str = "none"
    powersgd_rank: int = 1
    """PowerSGD's matrix_approximation_rank (with grad_compression `powersgd`)."""
    recompute: str = "none"
    precision: str = "auto"
    """`auto` = fp32 on CPU ranks, bf16 on GPUs."""
    profile_steps: int = 3
    """Steps traced with torch.profiler after the timed ones (0 = no trace)."""
    trace_dir: str = ""
    """Set by the launcher once the run id is known: each rank writes `rank<N>.json` here."""
    cpu_threads: int = 0
    """Threads per CPU rank (0 = the launcher's share of the cores); one value for every point of a run, so
    points with different rank counts do the same per-rank work the same way."""
    lr: float = 1e-3
    lora_rank: int = 0
    """LoRA adapters of this rank on the frozen decoder (0: every weight trains)."""
    lora_targets: str = "attn"
    seed: int = 0
    ep: int = 1
    """Expert-parallel ranks of an MoE model: 1 = every rank holds every expert; the rank count = each rank holds
    its share, and tokens move with all_to_all_single."""
    run: RunOptions = field(default_factory=RunOptions)

    @property
    def peft(self) -> Peft | None:
        """The adapters of a LoRA run, or None for full training."""
        return Peft(rank=self.lora_rank, targets=self.lora_targets) if self.lora_rank else None

    @property
    def layout(self) -> str:
        """`ddp`, `fsdp`, `tp` or `tp+fsdp` (what wraps the model; `tp` takes DDP over the dp ranks)."""
        sharded = self.fsdp or self.zero > 0
        if self.tp > 1:
            return "tp+fsdp" if sharded else "tp"
        return "fsdp" if sharded else "ddp"

    def layout_on(self, ranks: int) -> str:
        """The layout as `ranks` ranks run it: `tp+ddp` when tensor-parallel groups are data-parallel replicas."""
        if self.tp > 1 and ranks > self.tp and self.layout == "tp":
            return "tp+ddp"
        return self.layout

    def validated(self) -> TrainConfig:
        """A checked copy; raises UserError naming the first bad value."""
        _check_counts(self)
        _check_choice(self.grad_compression, "--grad-compression", COMPRESSIONS)
        _check_choice(self.recompute, "--recompute", RECOMPUTES)
        _check_choice(self.lora_targets, "--lora-targets", TARGETS)
        if self.precision != "auto":
            _check_choice(self.precision, "--precision", PRECISIONS)
        if self.powersgd_rank < 1:
            raise UserError(f"PowerSGD rank must be at least 1 (got {self.powersgd_rank})", field="comm_hook")
        if self.grad_compression == "powersgd" and self.powersgd_rank > min(self.model.hidden, self.model.q_dim):
            raise UserError(f"PowerSGD rank {self.powersgd_rank} is above the smallest matrix dimension "
                            f"{min(self.model.hidden, self.model.q_dim)} of {self.model.id}", field="comm_hook")
        zero = 3 if self.fsdp and self.zero == 0 else self.zero
        if zero and self.grad_compression != "none":
            raise UserError("works with DDP's communication hooks; it cannot be combined with "
                            "--fsdp/--zero", field="grad_compression")
        return replace(self, zero=zero, fsdp=zero > 0, run=self.run.validated())


HOOKS = {"fp16": ("default_hooks", "fp16_compress_hook"), "bf16": ("default_hooks", "bf16_compress_hook"),
         "powersgd": ("powerSGD_hook", "powerSGD_hook")}
"""Where each compression's PyTorch DDP communication hook lives (torch.distributed.algorithms.ddp_comm_hooks)."""


def parse_comm_hook(text: str) -> tuple[str, int]:
    """`--comm-hook fp16|bf16|powersgd:R` as (compression, PowerSGD rank)."""
    name, _, rank_text = text.partition(":")
    if name not in HOOKS or (rank_text and name != "powersgd"):
        raise UserError(f"'{text}' is not one of fp16, bf16, powersgd:RANK", field="comm_hook")
    try:
        rank = int(rank_text or "1")
    except ValueError:
        raise UserError(f"PowerSGD rank must be an integer (got '{rank_text}')", field="comm_hook") from None
    return name, rank


def missing_hook(compression: str, backend: str, gradient_mb: float = 0.0, bucket_mb: float = 25.0) -> str | None:
    """What this build lacks to run `compression`'s DDP hook on `backend` (`auto`: NCCL with CUDA, else gloo;
    None: nothing). bf16 all-reduce on NCCL needs NCCL 2.10 or later (the hook's own requirement). PowerSGD's hook
    issues its P and Q all-reduces from future callbacks, which gloo does not order across buckets: ranks then
    pair different collectives and gloo aborts (measured here; pytorch/pytorch#58467 records the hook failing its
    parity test on gloo), so on gloo it needs the whole gradient in one bucket."""
    if compression not in HOOKS:
        return None
    import importlib

    import torch

    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if compression == "bf16" and backend != "nccl":
        # The same rule as check_backend, said here so that --comm-hook names itself.
        return "bf16_compress_hook runs on the nccl backend only; use fp16 on CPU ranks"
    if compression == "powersgd" and backend == "gloo" and gradient_mb > bucket_mb:
        return (f"gloo cannot order PowerSGD's per-bucket all-reduces; give --bucket-mb {math.ceil(gradient_mb)} or "
                f"more (one bucket for the {gradient_mb:.1f} MB of gradients) or run on NCCL")

    module_name, attr = HOOKS[compression]
    try:
        module = importlib.import_module(f"torch.distributed.algorithms.ddp_comm_hooks.{module_name}")
    except ImportError as exc:
        return f"this PyTorch build has no torch.distributed.algorithms.ddp_comm_hooks.{module_name} ({exc})"
    if not hasattr(module, attr):
        return f"this PyTorch build has no {module_name}.{attr}"
    if compression == "bf16" and backend == "nccl":
        version = torch.cuda.nccl.version() if torch.cuda.is_available() else None
        if isinstance(version, tuple) and version < (2, 10):
            return f"bf16_compress_hook needs NCCL 2.10 or later; this build has NCCL {'.'.join(map(str, version))}"
    return None


def _check_choice(value: str, flag: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UserError(f"{flag}: '{value}' is not one of {', '.join(choices)}")


def _check_counts(cfg: TrainConfig) -> None:
    rules = [
        (cfg.micro_batch >= 1, f"--micro-batch must be at least 1, got {cfg.micro_batch}"),
        (cfg.iters >= 1, f"-n/--iters must be at least 1, got {cfg.iters}"),
        (cfg.warmup >= 0, f"-w/--warmup must be 0 or more, got {cfg.warmup}"),
        (cfg.repeat >= 1, f"--repeat must be at least 1, got {cfg.repeat}"),
        (cfg.zero in (0, 1, 2, 3), f"--zero must be 0, 1, 2 or 3, got {cfg.zero}"),
        (cfg.tp >= 1, f"--tp must be at least 1, got {cfg.tp}"),
        (cfg.profile_steps >= 0, f"--profile-steps must be 0 or more, got {cfg.profile_steps}"),
        (0 <= cfg.lora_rank <= cfg.model.hidden,
         f"--lora must be between 1 and the hidden size {cfg.model.hidden} (got {cfg.lora_rank})"),
    ]
    for ok, message in rules:
        if not ok:
            raise UserError(message)
    check_number(cfg.bucket_mb, "--bucket-mb", 0, MAX_BUCKET_MB, low_open=True)
    for flag, value, low, high in (("-n/--iters", cfg.iters, 1, MAX_ITERS), ("-w/--warmup", cfg.warmup, 0, MAX_WARMUP),
                                   ("--repeat", cfg.repeat, 1, MAX_REPEAT),
                                   ("--profile-steps", cfg.profile_steps, 0, MAX_PROFILE_STEPS),
                                   ("--micro-batch", cfg.micro_batch, 1, MAX_ITERS), ("--ep", cfg.ep, 1, MAX_GPUS)):
        check_number(value, flag, low, high)


def check_layout(cfg: TrainConfig, world: int) -> None:
    """What only the rank count rules out, before any rank starts (exit 2, one line)."""
    m = cfg.model
    if m.kv_lora_rank or m.q_dim != m.hidden:
        # The CPU-rank model is a decoder with heads x head_dim = hidden; anything else would be measured as a
        # different model than the one named.
        raise UserError(f"bench train builds models whose heads x head_dim is their hidden size; {m.id} is not one",
                        field="model")
    _check_experts(cfg, world)
    if cfg.tp > 1:
        if world < 2:
            raise UserError(f"{cfg.tp} needs at least 2 ranks, but the run has {world}", field="tp")
        if world % cfg.tp:
            raise UserError(f"{cfg.tp} does not divide the {world} ranks", field="tp")
        if m.heads % cfg.tp or m.kv_heads % cfg.tp:
            raise UserError(f"{cfg.tp} does not divide the {m.heads} attention heads ({m.kv_heads} KV heads) "
                            f"of {m.id}", field="tp")
        if m.ffn_hidden % cfg.tp:
            raise UserError(f"{cfg.tp} does not divide the MLP width {m.ffn_hidden} of {m.id}", field="tp")
        if world == cfg.tp and (cfg.zero or cfg.grad_compression != "none"):
            what = "--fsdp/--zero" if cfg.zero else "--grad-compression"
            raise UserError(f"{cfg.tp} on {world} ranks leaves no data-parallel ranks for {what}; "
                            f"run tp x dp ranks (e.g. --nproc {2 * cfg.tp})", field="tp")
    if cfg.grad_compression == "powersgd" and world < 2:
        raise UserError("powersgd needs at least 2 ranks", field="grad_compression")


def _check_experts(cfg: TrainConfig, world: int) -> None:
    """Expert parallelism as the synthetic decoder runs it: DDP over every rank, experts sharded over all of them."""
    m = cfg.model
    if not m.is_moe:
        if cfg.ep > 1:
            raise UserError(f"{cfg.ep} needs a mixture-of-experts model (--experts E --topk K)", field="ep")
        return
    if cfg.ep not in (1, world):
        raise UserError(f"{cfg.ep} must be 1 (every rank holds every expert) or the {world} ranks (experts "
                        "sharded over all of them)", field="ep")
    if m.experts % cfg.ep:
        raise UserError(f"{cfg.ep} does not divide the {m.experts} experts of {m.id}", field="ep")
    for used, what in ((cfg.tp > 1, "--tp"), (cfg.zero > 0, "--fsdp/--zero"), (cfg.lora_rank > 0, "--lora")):
        if used:
            raise UserError(f"bench train runs MoE models with DDP only; {what} cannot be combined with experts")


def check_backend(cfg: TrainConfig, backend: str) -> None:
    """What the backend cannot do, refused before any rank starts."""
    if cfg.grad_compression == "bf16" and backend != "nccl":
        raise UserError("bf16 needs the nccl backend (PyTorch's bf16 hook is NCCL-only); "
                        "use fp16 on CPU ranks", field="grad_compression")
    if cfg.grad_compression == "powersgd":
        # Per point, so that a --sweep's PowerSGD point is refused like --comm-hook's before any rank starts.
        problem = missing_hook("powersgd", backend, cfg.model.total_params() * 4 / 2**20, cfg.bucket_mb)
        if problem:
            raise UserError(problem, field="grad_compression")
    resolved_precision(cfg, backend)


def resolved_precision(cfg: TrainConfig, backend: str) -> str:
    """The number format the loop runs in: fp32 on CPU ranks, the asked one (bf16 by default) on GPUs."""
    if backend != "nccl":
        if cfg.precision not in ("auto", "fp32"):
            raise UserError(f"{cfg.precision} needs GPUs; CPU ranks train in fp32", field="precision")
        return "fp32"
    return "bf16" if cfg.precision == "auto" else cfg.precision
