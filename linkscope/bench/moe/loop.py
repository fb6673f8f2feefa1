"""What every rank of `bench moe` runs: route its tokens, exchange the counts, then time dispatch and combine.

Dispatch is one `all_to_all_single` with uneven split sizes (each token once per distinct destination rank, the
copy a rank keeps for its own experts included, as an all-to-allv dispatcher moves it); combine is the reverse
exchange of the bf16 results. Only the exchanges are timed: the send buffers are laid out (permuted by
destination) once before timing, as nccl-tests prepares its buffers, so the figures are the communication's.

Each timed exchange starts after a barrier on the control group and is timed on its own with the backend's timer
(wall clock on gloo, CUDA events on the current stream on nccl); per iteration the slowest rank's time counts,
as nccl-tests combines ranks, and rank 0 reports the per-iteration maxima.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from linkscope.bench import faults
from linkscope.bench.comm import RankContext
from linkscope.bench.events import MoeSink
from linkscope.bench.moe.config import MoeConfig
from linkscope.bench.moe.routing import route_rank

FAULT_OP = "moe"
"""The test suite's fault hook fires before timed iteration `size` of this op (`bench.faults`)."""
SRC_BYTE = 0
"""Every token row carries its source rank (mod 256) in this byte, so a misrouted row is found after the first
exchange."""


def _exchange_counts(ctx: RankContext, send_counts: list[int]) -> list[int]:
    """What every other rank sends here, exchanged over the measured group as a dispatcher does."""
    send = torch.tensor(send_counts, dtype=torch.int64, device=ctx.device)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=ctx.group)
    return [int(v) for v in recv.cpu().tolist()]


def _gather_lists(ctx: RankContext, values: list[int]) -> list[list[int]]:
    out: list[Any] = [None] * ctx.world
    dist.all_gather_object(out, values, group=ctx.ctrl)
    return [list(v) for v in out]


def _slowest(ctx: RankContext, seconds: list[float]) -> list[float]:
    """Per iteration, the largest time over ranks."""
    tensor = torch.tensor(seconds, dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=ctx.ctrl)
    return [float(v) for v in tensor.tolist()]


def _wrong_rows(recv: torch.Tensor, recv_splits: list[int]) -> int:
    """Rows whose source byte does not name the rank they came from."""
    wrong, start = 0, 0
    for src, rows in enumerate(recv_splits):
        got = recv[start:start + rows, SRC_BYTE].cpu()
        wrong += int((got != src % 256).sum())
        start += rows
    return wrong


def run_moe(ctx: RankContext, cfg: MoeConfig, sink: MoeSink) -> None:
    """Route, exchange counts, warm up, and time `cfg.iters` dispatches and combines; rank 0 reports."""
    mine = route_rank(ctx.rank, cfg.tokens_per_rank, cfg.topk, cfg.experts, ctx.world, cfg.skew, cfg.seed,
                      ctx.env.local_world)
    send_splits = [int(v) for v in mine.send_counts]
    recv_splits = _exchange_counts(ctx, send_splits)
    gen = torch.Generator().manual_seed(cfg.seed * 65537 + ctx.rank)
    tokens = torch.randint(0, 256, (cfg.tokens_per_rank, cfg.dispatch_bytes), dtype=torch.uint8, generator=gen)
    tokens[:, SRC_BYTE] = ctx.rank % 256
    order = torch.from_numpy(mine.order)
    send = tokens[order].contiguous().to(ctx.device)
    recv = torch.empty((sum(recv_splits), cfg.dispatch_bytes), dtype=torch.uint8, device=ctx.device)
    back_send = torch.ones((sum(recv_splits), cfg.combine_bytes), dtype=torch.uint8, device=ctx.device)
    back_recv = torch.empty((sum(send_splits), cfg.combine_bytes), dtype=torch.uint8, device=ctx.device)
    del tokens, order

    def dispatch() -> None:
        dist.all_to_all_single(recv, send, recv_splits, send_splits, group=ctx.group)

    def combine() -> None:
        dist.all_to_all_single(back_recv, back_send, send_splits, recv_splits, group=ctx.group)

    copies = ctx.allreduce_float(float(mine.rank_copies), "sum")
    node_copies = ctx.allreduce_float(float(mine.node_copies), "sum")
    counts = _gather_lists(ctx, send_splits)
    ctx.progress.advance()
    if ctx.rank == 0:
        total = float(cfg.tokens_per_rank * ctx.world)
        sink.moe_routed({"counts": counts, "ranks_per_token": copies / total, "nodes_per_token": node_copies / total,
                         "ranks_per_node": ctx.env.local_world})
    dispatch()
    ctx.timer.wait()
    wrong = _wrong_rows(recv, recv_splits)
    for _ in range(cfg.warmup):
        dispatch()
        combine()
    ctx.barrier()
    ctx.progress.advance()
    dispatch_s, combine_s = _timed(ctx, cfg.iters, dispatch, combine)
    wrong_by_rank = ctx.allgather_int(wrong)
    slowest = _slowest(ctx, dispatch_s + combine_s)
    if ctx.rank == 0:
        sink.moe_timed({"dispatch_s": slowest[:cfg.iters], "combine_s": slowest[cfg.iters:],
                        "wrong_rows": wrong_by_rank})


def _timed(ctx: RankContext, iters: int, dispatch: Callable[[], None],
           combine: Callable[[], None]) -> tuple[list[float], list[float]]:
    """This rank's seconds for each timed dispatch and combine."""
    dispatch_s, combine_s = [], []
    for i in range(iters):
        faults.before_size(ctx.rank, FAULT_OP, i)
        ctx.barrier()
        dispatch_s.append(ctx.timer.loop_seconds(dispatch, 1, None))
        ctx.barrier()
        combine_s.append(ctx.timer.loop_seconds(combine, 1, None))
        ctx.progress.advance()
    return dispatch_s, combine_s


def where_label(cfg: MoeConfig) -> Callable[[int], str]:
    """Progress counter -> words: 0 starting, 1 joined, 2 routed, 3 warmed up, then one per timed iteration."""

    def where(value: int) -> str:
        if value <= 0:
            return "while starting"
        if value == 1:
            return "while routing and exchanging counts"
        if value == 2:
            return "in the warm-up dispatches"
        done = value - 3
        return f"in dispatch/combine {min(done + 1, cfg.iters)} of {cfg.iters}"

    return where
