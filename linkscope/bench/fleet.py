"""Measurements of `check --fleet` on the ranks of a torchrun (or Slurm) job spanning many nodes.

Node pairs are measured in rounds, every node against a different node each round (the circle method of a
round-robin tournament), all pairs of a round at once: in a pair, each rank exchanges messages with the rank of the
same local rank on the other node (so every NIC of both nodes carries traffic). A slow node is then slow in every
pair it is in, while its partners are slow only in the round they meet it: the per-node median names it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from linkscope.bench.comm import RankContext
from linkscope.bench.faults import before_size, slow_send
from linkscope.results.busbw import algbw_gb_per_s, bus_factors


FAULT_OP = "fleet_pairs"
"""Where the test suite's LINKSCOPE_TEST_FAULT can stop a rank in the pair rounds (`size` = the round)."""


def pair_rounds(nodes: int, max_rounds: int) -> list[list[tuple[int, int]]]:
    """Disjoint node pairs per round, each node meeting a new partner each round (at most nodes - 1 rounds; with an
    odd count one node sits each round out)."""
    if nodes < 2:
        return []
    ring: list[int | None] = [*range(nodes), *([None] if nodes % 2 else [])]
    n = len(ring)
    out = []
    for _ in range(min(max_rounds, n - 1)):
        pairs = [(ring[i], ring[n - 1 - i]) for i in range(n // 2)]
        out.append(sorted((min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None))
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return out


@dataclass(frozen=True)
class PairResult:
    """One rank pair of one round: ranks `rank_a` (on node_a) and `rank_b` (on node_b), same local rank."""

    round: int
    node_a: int
    node_b: int
    rank_a: int
    rank_b: int
    gb_per_s: float
    """Bytes each way / time, the better of the repeats (per direction, both directions at once)."""


def _partner_of(rank: int, pairs: list[tuple[int, int]], node_of: list[int], local_of: list[int]) -> int | None:
    """The rank `rank` exchanges with this round: same local rank, on the node its node is paired with."""
    mine = node_of[rank]
    for a, b in pairs:
        if mine in (a, b):
            other = b if mine == a else a
            peers = [r for r in range(len(node_of)) if node_of[r] == other and local_of[r] == local_of[rank]]
            return peers[0] if peers else None
    return None


def _exchange(ctx: RankContext, peer: int, send: torch.Tensor, recv: torch.Tensor, iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        slow_send()
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)])
        for work in works:
            work.wait()
    ctx.timer.wait()
    return time.perf_counter() - start


def measure_rounds(ctx: RankContext, node_of: list[int], local_of: list[int], size_bytes: int, iters: int,
                   repeats: int, max_rounds: int) -> list[PairResult]:
    """Every round's pairs at once; every rank gets every result (the best of `repeats` per pair)."""
    send = torch.ones(size_bytes, dtype=torch.uint8, device=ctx.device)
    recv = torch.zeros(size_bytes, dtype=torch.uint8, device=ctx.device)
    results: list[PairResult] = []
    for index, pairs in enumerate(pair_rounds(max(node_of) + 1, max_rounds)):
        peer = _partner_of(ctx.rank, pairs, node_of, local_of)
        best = 0.0
        for attempt in range(repeats + 1):  # the first exchange warms the connection up
            before_size(ctx.rank, FAULT_OP, index)
            # Advance before waiting for the others: a node that died stays behind, so rank 0 can name it.
            ctx.progress.advance()
            ctx.barrier()
            seconds = _exchange(ctx, peer, send, recv, iters) if peer is not None else 0.0
            if attempt and seconds > 0:
                best = max(best, size_bytes * iters / 1e9 / seconds)
        ctx.progress.advance()
        rates: list[float] = [0.0] * ctx.world
        dist.all_gather_object(rates, best, group=ctx.ctrl)
        for rank in range(ctx.world):
            partner = _partner_of(rank, pairs, node_of, local_of)
            if partner is not None and rank < partner:
                # Both ends timed the same exchange; the slower end's figure is the pair's.
                results.append(PairResult(index, node_of[rank], node_of[partner], rank, partner,
                                          min(rates[rank], rates[partner])))
    return results


def time_all_reduce(ctx: RankContext, size_bytes: int, iters: int, group: object | None = None,
                    ranks: int | None = None) -> tuple[float, float, float]:
    """(time_us, algbw, busbw) of a float32 all-reduce of `size_bytes` over `group` of `ranks` ranks (every rank by
    default; nccl-tests' busbw). The slowest rank's time when it is every rank."""
    tensor = torch.ones(max(1, size_bytes // 4), dtype=torch.float32, device=ctx.device)

    def call() -> None:
        dist.all_reduce(tensor, group=group)

    call()  # warm-up
    if group is None:
        ctx.barrier()
    seconds = ctx.timer.loop_seconds(call, iters, None)
    if group is None:
        seconds = ctx.allreduce_float(seconds, "max")
    algbw = float(algbw_gb_per_s(tensor.numel() * 4, seconds * 1e6))
    return seconds * 1e6, algbw, algbw * float(bus_factors("all_reduce", ranks or ctx.world))
