"""The pairwise matrix, as p2pBandwidthLatencyTest and nvbandwidth measure it (reference: collectives.md 3.4-3.5).

One pair at a time while every other rank waits: unidirectional bandwidth (src sends `iters` messages
back to back to dst), bidirectional bandwidth (both send to each other at once; the two directions
are added) and latency (a small message bounced `latency_iters` times; half the round trip).
Bandwidth is in GB/s (10^9 bytes/s). On gloo it measures what the host's loopback gives; on nccl
the same code runs NCCL send/recv between GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from linkscope.bench.comm import RankContext
from linkscope.bench.config import P2PConfig
from linkscope.bench.events import Sink
from linkscope.results.records import PairRow


def _pair_seconds(ctx: RankContext, active: bool, body: Callable[[], None]) -> float:
    """Time `body` on the ranks of the pair; the slower of the two, known to every rank."""
    ctx.barrier()
    elapsed_s = 0.0
    if active:
        start = time.perf_counter()
        body()
        ctx.timer.wait()
        elapsed_s = time.perf_counter() - start
    return ctx.allreduce_float(elapsed_s, "max")


def _stream(works: list[dist.Work | None]) -> None:
    for work in works:
        if work is not None:
            work.wait()


def _one_way(ctx: RankContext, src: int, dst: int, buf: torch.Tensor, iters: int) -> Callable[[], None]:
    def body() -> None:
        if ctx.rank == src:
            _stream([dist.isend(buf, dst) for _ in range(iters)])
        else:
            _stream([dist.irecv(buf, src) for _ in range(iters)])

    return body


def _both_ways(ctx: RankContext, peer: int, send: torch.Tensor, recv: torch.Tensor, iters: int) -> Callable[[], None]:
    # Each send is batched with its receive: on NCCL, an ungrouped send queued ahead of the receive on
    # both sides would wait for each other.
    pair = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]

    def body() -> None:
        works: list[dist.Work | None] = []
        for _ in range(iters):
            works += dist.batch_isend_irecv(pair)
        _stream(works)

    return body


def _ping_pong(ctx: RankContext, first: int, peer: int, buf: torch.Tensor, iters: int) -> Callable[[], None]:
    def body() -> None:
        for _ in range(iters):
            if ctx.rank == first:
                dist.send(buf, peer)
                dist.recv(buf, peer)
            else:
                dist.recv(buf, peer)
                dist.send(buf, peer)

    return body


def _gb_per_s(nbytes: int, seconds: float) -> float | None:
    return nbytes / 1e9 / seconds if seconds > 0 else None


def measure_pair(ctx: RankContext, a: int, b: int, cfg: P2PConfig, bufs: tuple[torch.Tensor, ...]) -> list[PairRow]:
    """Both directions, both at once, and latency between ranks a and b; every rank takes part in the timing."""
    send, recv, small = bufs
    active = ctx.rank in (a, b)
    peer = b if ctx.rank == a else a
    rows: dict[tuple[int, int], float | None] = {}
    for src, dst in ((a, b), (b, a)):
        _pair_seconds(ctx, active, _one_way(ctx, src, dst, send if ctx.rank == src else recv, cfg.warmup))
        seconds = _pair_seconds(ctx, active, _one_way(ctx, src, dst, send if ctx.rank == src else recv, cfg.iters))
        rows[(src, dst)] = _gb_per_s(cfg.size_bytes * cfg.iters, seconds)
    _pair_seconds(ctx, active, _both_ways(ctx, peer, send, recv, cfg.warmup))
    bi_s = _pair_seconds(ctx, active, _both_ways(ctx, peer, send, recv, cfg.iters))
    bi = _gb_per_s(2 * cfg.size_bytes * cfg.iters, bi_s)
    _pair_seconds(ctx, active, _ping_pong(ctx, a, peer, small, max(1, cfg.warmup)))
    lat_s = _pair_seconds(ctx, active, _ping_pong(ctx, a, peer, small, cfg.latency_iters))
    latency_us = lat_s / (2 * cfg.latency_iters) * 1e6
    return [PairRow(s, d, cfg.size_bytes, rows[(s, d)], bi, latency_us) for s, d in ((a, b), (b, a))]


def run_pairs(ctx: RankContext, cfg: P2PConfig, sink: Sink) -> None:
    """Every unordered pair in turn; rank 0 reports both ordered cells of each pair."""
    send = torch.ones(cfg.size_bytes, dtype=torch.uint8, device=ctx.device)
    recv = torch.zeros(cfg.size_bytes, dtype=torch.uint8, device=ctx.device)
    small = torch.zeros(cfg.latency_bytes, dtype=torch.uint8, device=ctx.device)
    for a in range(ctx.world):
        for b in range(a + 1, ctx.world):
            ctx.progress.advance()
            rows = measure_pair(ctx, a, b, cfg, (send, recv, small))
            ctx.progress.advance()
            for row in rows:
                sink.pair_done(row)


def matrix(rows: list[PairRow], world: int, field: str) -> list[list[float | None]]:
    """A world x world matrix of one PairRow field (`uni_gb_per_s`, `bi_gb_per_s`, `latency_us`); None on the
    diagonal."""
    out: list[list[float | None]] = [[None] * world for _ in range(world)]
    for row in rows:
        if 0 <= row.src < world and 0 <= row.dst < world:
            out[row.src][row.dst] = getattr(row, field)
    return out
