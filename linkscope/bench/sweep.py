"""The per-rank measurement loop, with nccl-tests' semantics (reference: collectives.md 1.5-1.6).

For each op and size: allocate the buffers once; warm up (out-of-place, as nccl-tests does); then for
out-of-place and in-place in turn: one untimed sync operation and a barrier, a timed loop of `iters`
back-to-back operations, the per-rank times combined by `-a`, and the `-c` correctness check.
"""

from __future__ import annotations

import time

import torch

from linkscope.bench import faults
from linkscope.bench.comm import RankContext
from linkscope.bench.config import BenchConfig
from linkscope.bench.dtypes import DType, dtype_by_name
from linkscope.bench.events import Sink, SizeResult
from linkscope.bench.ops import OPS, PLACEMENTS, Bound, OpSpec, Peers, alloc_buffers, bind
from linkscope.bench.sizes import Counts, coll_counts
from linkscope.bench.timing import iters_for_min_time
from linkscope.bench.verify import CheckData, count_wrong, expected_output, input_values
from linkscope.results.records import CollectiveRow, Placement


def run_sweep(ctx: RankContext, cfg: BenchConfig, sink: Sink) -> None:
    """Every repeat, op and size, in order; rank 0 reports each size to `sink` as it completes."""
    sizes = cfg.sizes()
    dt = dtype_by_name(cfg.dtype)
    for repeat in range(cfg.repeat):
        for op in cfg.ops:
            sink.op_started(op, repeat)
            for index, size_bytes in enumerate(sizes):
                faults.before_size(ctx.rank, op, size_bytes)
                ctx.progress.advance()
                rows, wrong = measure_size(ctx, OPS[op], size_bytes, cfg, dt)
                ctx.progress.advance()
                sink.size_done(SizeResult(repeat, op, index, rows, wrong))
            sink.op_finished(op, repeat)


def measure_size(
    ctx: RankContext, spec: OpSpec, size_bytes: int, cfg: BenchConfig, dt: DType
) -> tuple[list[CollectiveRow], dict[str, dict[int, int]]]:
    """Both placements of one op at one size: rows (identical on every rank) and wrong ranks."""
    counts = coll_counts(spec.count_kind, size_bytes, dt.size_bytes, ctx.world)
    bufs = alloc_buffers(counts, getattr(torch, dt.torch_name), ctx.device)
    # Defined contents: uninitialised memory may hold NaNs or denormals, which slow CPU reductions.
    bufs.send.fill_(1)
    bufs.recv.fill_(1)
    peers = Peers(ctx.rank, ctx.world, cfg.root, cfg.redop)
    rows: list[CollectiveRow] = []
    wrong: dict[str, dict[int, int]] = {}
    iters = cfg.iters
    for placement in PLACEMENTS:
        bound = bind(spec, bufs, counts, placement, peers)
        if bound.prepare is not None:
            bound.prepare()
        if placement == "out_of_place":
            iters = warm_up(ctx, bound, cfg)
        time_s = time_placement(ctx, bound, iters, cfg)
        nwrong, by_rank = run_checks(ctx, spec, bound, counts, placement, cfg, dt, size_bytes)
        rows.append(make_row(spec, counts, dt, cfg, ctx.world, placement, time_s, nwrong, iters))
        if by_rank:
            wrong[placement] = by_rank
    return rows, wrong


def warm_up(ctx: RankContext, bound: Bound, cfg: BenchConfig) -> int:
    """Run the warmup operations; return the iteration count every rank will time with."""
    calls = max(cfg.warmup, 1 if cfg.min_time_s > 0 else 0)
    start = time.perf_counter()
    for _ in range(calls):
        bound.call()
    ctx.timer.wait()
    if cfg.min_time_s <= 0:
        return cfg.iters
    # The slowest rank's estimate, so every rank derives the same count from the same number.
    estimate_s = ctx.allreduce_float((time.perf_counter() - start) / calls, "max")
    return iters_for_min_time(estimate_s, cfg.min_time_s, cfg.iters)


def time_placement(ctx: RankContext, bound: Bound, iters: int, cfg: BenchConfig) -> float:
    """One sync operation and a barrier, the timed loop, then the per-rank times combined by `-a`."""
    bound.call()
    ctx.barrier()
    after_each = ctx.barrier if cfg.blocking else None
    local_s = ctx.timer.loop_seconds(bound.call, iters, after_each)
    return combine_across_ranks(ctx, local_s, cfg.average)


def combine_across_ranks(ctx: RankContext, value_s: float, mode: int) -> float:
    """`-a`: 0 rank 0's time, 1 the mean, 2 the minimum, 3 the maximum over ranks."""
    if mode == 0:
        return ctx.broadcast_float(value_s, src=0)
    if mode == 1:
        return ctx.allreduce_float(value_s, "sum") / ctx.world
    return ctx.allreduce_float(value_s, "min" if mode == 2 else "max")


def run_checks(
    ctx: RankContext,
    spec: OpSpec,
    bound: Bound,
    counts: Counts,
    placement: str,
    cfg: BenchConfig,
    dt: DType,
    size_bytes: int,
) -> tuple[int | None, dict[int, int]]:
    """`-c` check iterations: (wrong elements summed over ranks, {rank: wrong}); None = not checked."""
    if cfg.check == 0 or (placement == "in_place" and not spec.checks_in_place(ctx.backend)):
        return None, {}
    local = 0
    for iteration in range(cfg.check):
        data = CheckData(ctx.world, spec.redop_label(cfg.redop), dt, iteration + 1, ctx.device)
        bound.inputs.copy_(input_values(spec.name, ctx.rank, counts, data))
        if bound.prepare is not None:
            bound.prepare()
        bound.call()
        ctx.timer.wait()
        if bound.output is not None:
            faults.corrupt_output(bound.output, ctx.rank, spec.name, size_bytes)
            expected = expected_output(spec.name, ctx.rank, cfg.root, counts, data)
            local += count_wrong(bound.output, expected)
    per_rank = ctx.allgather_int(local)
    return sum(per_rank), {rank: n for rank, n in enumerate(per_rank) if n}


def make_row(
    spec: OpSpec,
    counts: Counts,
    dt: DType,
    cfg: BenchConfig,
    world: int,
    placement: Placement,
    time_s: float,
    nwrong: int | None,
    iters: int,
) -> CollectiveRow:
    """One half-row as nccl-tests prints it."""
    algbw, busbw = spec.bandwidths(counts, dt.size_bytes, world, time_s)
    return CollectiveRow(
        op=spec.name,
        size_bytes=counts.size_bytes(dt.size_bytes),
        count=counts.param,
        dtype=dt.name,
        redop=spec.redop_label(cfg.redop),
        root=spec.root_label(cfg.root),
        placement=placement,
        time_us=time_s * 1e6,
        algbw=algbw,
        busbw=busbw,
        nwrong=nwrong,
        world_size=world,
        iters=iters,
        times_us=[time_s * 1e6],
    )


def step_label(cfg: BenchConfig, progress_value: int) -> str:
    """Where a rank whose progress counter reads `progress_value` is in the sweep, in words."""
    if progress_value <= 0:
        return "while starting (before joining the process group)"
    sizes = cfg.sizes()
    steps = [(r, op, s) for r in range(cfg.repeat) for op in cfg.ops for s in sizes]
    index = (progress_value - 1) // 2
    if index >= len(steps):
        return "after the last size"
    repeat, op, size_bytes = steps[index]
    where = f"{op} {size_bytes} B" + (f" (repeat {repeat + 1})" if cfg.repeat > 1 else "")
    return f"at {where}" if progress_value % 2 == 0 else f"before {where}"
