"""What a `bench kv` run is asked to do, validated once at the edge (a picklable dataclass sent to every rank).

Ranks pair up as in disaggregated serving: rank r of the first half (a prefill rank) sends to rank r + world / 2 (its
decode rank). A request is a prompt of `tokens` tokens whose KV cache is paged in blocks of `block_tokens`: with
`request` granularity a page is one block of every layer (layers x KV heads x head dim x K and V), with `layer`
granularity one layer's block. Each point of the sweep (a block size and a number of requests in flight) moves every
page of that many requests, one message per page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from linkscope.bench.config import RunOptions
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import MAX_ITERS, MAX_WARMUP, check_number
from linkscope.model.step.infer import BYTES_PER_WEIGHT
from linkscope.model.step.kv_transfer import GRANULARITIES

MAX_TOKENS = 1 << 20
MAX_IN_FLIGHT = 1024
MAX_LAYERS = 1024
MAX_KV_HEADS = 1024
MAX_HEAD_DIM = 16384
MAX_POINTS = 64
"""Block sizes x in-flight counts in one run."""
MAX_MESSAGES = 4_000_000
"""Pages one point may post per pair (a request of 1M tokens at block 1 per layer is far beyond this)."""
FAULT_OP = "kv"
"""The test suite's fault hook fires before timed transfer `size` of the run, counted across its points
(`bench.faults`)."""


@dataclass
class KvConfig:
    """The page geometry, the sweep, and how many times each point is timed."""

    layers: int
    kv_heads: int
    """KV heads each rank holds (its TP shard of the model's)."""
    head_dim: int
    tokens: int = 2048
    block_tokens: tuple[int, ...] = (16, 32, 64, 128)
    in_flight: tuple[int, ...] = (1, 4)
    granularity: str = "request"
    kv_precision: str = "bf16"
    iters: int = 10
    warmup: int = 2
    model: str = ""
    """The model preset the geometry came from ("" when given by hand)."""
    run: RunOptions = field(default_factory=RunOptions)

    def validated(self) -> KvConfig:
        """A checked copy; raises UserError naming the first bad value."""
        for flag, value, top in (("--layers", self.layers, MAX_LAYERS), ("--kv-heads", self.kv_heads, MAX_KV_HEADS),
                                 ("--head-dim", self.head_dim, MAX_HEAD_DIM), ("--tokens", self.tokens, MAX_TOKENS),
                                 ("-n/--iters", self.iters, MAX_ITERS)):
            check_number(value, flag, 1, top)
        check_number(self.warmup, "-w/--warmup", 0, MAX_WARMUP)
        if not self.block_tokens or not self.in_flight:
            raise UserError("--block-tokens and --in-flight need at least one value each")
        for block in self.block_tokens:
            if not 1 <= block <= self.tokens:
                raise UserError(f"must be between 1 and the {self.tokens} tokens of a request (got {block})",
                                field="block_tokens")
        for count in self.in_flight:
            check_number(count, "--in-flight", 1, MAX_IN_FLIGHT)
        if len(self.block_tokens) * len(self.in_flight) > MAX_POINTS:
            raise UserError(f"{len(self.block_tokens)} block sizes x {len(self.in_flight)} in-flight counts is more "
                            f"than {MAX_POINTS} points in one run")
        if self.granularity not in GRANULARITIES:
            raise UserError(f"must be one of {', '.join(GRANULARITIES)} (got '{self.granularity}')",
                            field="kv_granularity")
        if self.kv_precision not in BYTES_PER_WEIGHT:
            raise UserError(f"must be one of {', '.join(BYTES_PER_WEIGHT)} (got '{self.kv_precision}')",
                            field="kv_precision")
        for block in self.block_tokens:
            if self.pages(block) * max(self.in_flight) > MAX_MESSAGES:
                raise UserError(f"block {block}: {self.pages(block) * max(self.in_flight):,} pages in flight per pair "
                                f"is more than {MAX_MESSAGES:,}; give a larger --block-tokens or fewer --tokens",
                                field="block_tokens")
        return replace(self, run=self.run.validated())

    @property
    def token_layer_bytes(self) -> int:
        """K and V of one token in one layer, for the heads a rank holds."""
        return 2 * self.kv_heads * self.head_dim * BYTES_PER_WEIGHT[self.kv_precision]

    def pages(self, block: int) -> int:
        """Pages of one request at `block` tokens per page."""
        blocks = math.ceil(self.tokens / block)
        return blocks * (self.layers if self.granularity == "layer" else 1)

    def page_bytes(self, block: int) -> int:
        """One page: a block of every layer (request granularity) or of one layer."""
        return block * self.token_layer_bytes * (1 if self.granularity == "layer" else self.layers)

    @property
    def request_bytes(self) -> int:
        """One request's pages, padding of the last block included (what moves)."""
        return max(self.pages(b) * self.page_bytes(b) for b in self.block_tokens)

    def rank_bytes(self) -> int:
        """What one rank holds at the most: the largest point's pages (sent or received)."""
        return max(self.pages(b) * self.page_bytes(b) for b in self.block_tokens) * max(self.in_flight)

    def points(self) -> list[tuple[int, int]]:
        """(block tokens, requests in flight), in the order they run."""
        return [(b, n) for b in self.block_tokens for n in self.in_flight]


def check_world(world: int) -> None:
    """What only the rank count rules out, before any rank starts (exit 2, one line)."""
    if world < 2 or world % 2:
        raise UserError(f"bench kv pairs each prefill rank with a decode rank, so it needs an even number of "
                        f"ranks (2 or more), but the run has {world}")
