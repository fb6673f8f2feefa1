"""Does `bench moe` make an all-to-all look slower than it is?

On 2 (and 4) local gloo ranks, compares the dispatch and combine times `bench moe` reports with a bare
`dist.all_to_all_single` loop moving the same bytes with the same split sizes, in the same processes. The
`bench moe` side is its own per-rank code (`linkscope.bench.moe.loop.run_moe`: routing, the count exchange, a
barrier before each timed exchange, the median over iterations of the slowest rank's time). The bare side takes
the split sizes from the same routing (`route_rank` with the same seed), calls `all_to_all_single` `iters` times,
each after a plain `dist.barrier()` and under its own `perf_counter`, and takes the same statistic (the median of
the slowest rank's time per call), so what differs is only the harness. The last column is the same bare loop
without the barriers, for reference: there the slowest rank's time also holds the time it waited for a peer that
started late, which on a loaded host is most of the difference.

Two measurements, as `harness_overhead.py` makes them for `bench`:

1. Direct: the two alternate in adjacent pairs (which goes first alternates too). Loopback gloo on a shared
   machine varies a lot from one exchange to the next, so each direction gets the mean of the per-pair log ratios
   with its 95% confidence interval: within +-5% is PASS, wholly outside is FAIL, otherwise INCONCLUSIVE.
2. Isolated: inside the timed region the only code that differs is `bench moe`'s timer around the call. With
   `all_to_all_single` replaced by a stub that returns at once, its extra cost per exchange is measured precisely
   and shown as a share of the bare exchange time: an upper bound on what the harness adds to a figure.

Verdict: PASS when the isolated share is below 5% everywhere and no direct comparison FAILs.

    python benchmarks/bench_moe_overhead.py [--worlds 2,4] [--rounds 12] [--iters 10]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHAPE = {"tokens_per_rank": 2048, "hidden": 1024, "topk": 8, "experts": 64, "skew": 1.0, "precision": "bf16"}
WARMUP = 3
TOLERANCE = 0.05
T_95 = 2.2  # two-sided 95% quantile of Student's t for about 12 pairs, rounded up


class _Capture:
    """Rank 0's sink: keeps what `run_moe` reports."""

    def __init__(self) -> None:
        self.timings: dict[str, Any] = {}

    def moe_timed(self, timings: dict[str, Any]) -> None:
        self.timings = timings

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


def _bare_buffers(ctx: Any, cfg: Any) -> tuple[Any, ...]:
    """Send and receive buffers of both directions with the split sizes of the same routing."""
    import torch
    import torch.distributed as dist

    from linkscope.bench.moe.routing import route_rank

    mine = route_rank(ctx.rank, cfg.tokens_per_rank, cfg.topk, cfg.experts, ctx.world, cfg.skew, cfg.seed)
    send_splits = [int(v) for v in mine.send_counts]
    counts = torch.tensor(send_splits, dtype=torch.int64)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)
    recv_splits = [int(v) for v in recv_counts.tolist()]
    u8 = torch.uint8
    return (torch.ones((sum(send_splits), cfg.dispatch_bytes), dtype=u8),
            torch.empty((sum(recv_splits), cfg.dispatch_bytes), dtype=u8),
            torch.ones((sum(recv_splits), cfg.combine_bytes), dtype=u8),
            torch.empty((sum(send_splits), cfg.combine_bytes), dtype=u8), send_splits, recv_splits)


def _bare(bufs: tuple[Any, ...], iters: int, aligned: bool) -> tuple[float, float]:
    """Median seconds per dispatch and per combine of a plain loop: each call under its own clock, the slowest
    rank's time per call. `aligned`: a plain `dist.barrier()` before each call, as `bench moe` times."""
    import torch
    import torch.distributed as dist

    send, recv, back_send, back_recv, send_splits, recv_splits = bufs
    out = []
    for args in ((recv, send, recv_splits, send_splits), (back_recv, back_send, send_splits, recv_splits)):
        for _ in range(WARMUP):
            dist.all_to_all_single(*args)
        seconds = []
        for _ in range(iters):
            if aligned:
                dist.barrier()
            start = time.perf_counter()
            dist.all_to_all_single(*args)
            seconds.append(time.perf_counter() - start)
        slowest = torch.tensor(seconds, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        out.append(statistics.median(slowest.tolist()))
    return out[0], out[1]


def _linkscope(ctx: Any, cfg: Any, sink: _Capture) -> tuple[float, float]:
    """`bench moe`'s per-rank code; its medians of the slowest rank's time (the same on every rank)."""
    import torch
    import torch.distributed as dist

    from linkscope.bench.moe.loop import run_moe

    run_moe(ctx, cfg, sink)
    medians = [0.0, 0.0]
    if ctx.rank == 0:
        medians = [statistics.median(sink.timings["dispatch_s"]), statistics.median(sink.timings["combine_s"])]
    shared = torch.tensor(medians, dtype=torch.float64)
    dist.broadcast(shared, src=0)
    return float(shared[0]), float(shared[1])


def _rank(rank: int, world: int, init_method: str, rounds: int, iters: int, q: Any) -> None:
    from linkscope.bench.comm import init_rank
    from linkscope.bench.layout import RankEnv
    from linkscope.bench.moe.config import MoeConfig

    ctx = init_rank(RankEnv(rank, world, rank, world, 0), "gloo", init_method, 600.0, lambda value: None)
    cfg = MoeConfig(**SHAPE, iters=iters, warmup=WARMUP)  # type: ignore[arg-type]
    sink = _Capture()
    bufs = _bare_buffers(ctx, cfg)
    pairs = []
    for index in range(rounds):
        if index % 2 == 0:
            bare = _bare(bufs, iters, True)
            mine = _linkscope(ctx, cfg, sink)
        else:
            mine = _linkscope(ctx, cfg, sink)
            bare = _bare(bufs, iters, True)
        pairs.append((bare, mine, _bare(bufs, iters, False)))
    if rank == 0:
        q.put(pairs)
    ctx.close()


def _wrapper_overhead_s(calls: int = 100_000, repeats: int = 5) -> float:
    """Extra seconds per exchange of `bench moe`'s timed region over a bare one, with a stub for the collective:
    its timer (`WallTimer.loop_seconds` of one call) against `perf_counter` around the bare call."""
    import torch.distributed as dist

    from linkscope.bench.timing import WallTimer

    def stub(*args: Any, **kwargs: Any) -> None:
        return None

    real, dist.all_to_all_single = dist.all_to_all_single, stub  # type: ignore[assignment]
    try:
        def call() -> None:
            dist.all_to_all_single(None, None, [1], [1], group=None)

        timer = WallTimer()
        best_mine = best_bare = math.inf
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                timer.loop_seconds(call, 1, None)
            best_mine = min(best_mine, (time.perf_counter() - start) / calls)
            start = time.perf_counter()
            for _ in range(calls):
                begin = time.perf_counter()
                dist.all_to_all_single(None, None, [1], [1])
                time.perf_counter() - begin
            best_bare = min(best_bare, (time.perf_counter() - start) / calls)
    finally:
        dist.all_to_all_single = real  # type: ignore[assignment]
    return max(0.0, best_mine - best_bare)


def _verdict(low: float, high: float) -> str:
    if low >= -TOLERANCE and high <= TOLERANCE:
        return "PASS"
    if high < -TOLERANCE or low > TOLERANCE:
        return "FAIL"
    return "INCONCLUSIVE"


def _report(world: int, pairs: list[tuple[tuple[float, float], ...]], wrapper_s: float) -> tuple[list[str], float]:
    verdicts, share = [], 0.0
    for index, phase in enumerate(("dispatch", "combine")):
        logs = [math.log(mine[index] / bare[index]) for bare, mine, _ in pairs]
        mean = statistics.fmean(logs)
        half = T_95 * statistics.stdev(logs) / math.sqrt(len(logs))
        low, high = math.exp(mean - half) - 1, math.exp(mean + half) - 1
        bare_us, mine_us, loose_us = (statistics.median(p[k][index] for p in pairs) * 1e6 for k in range(3))
        verdicts.append(_verdict(low, high))
        share = max(share, wrapper_s * 1e6 / bare_us)
        print(f"{world:>5}  {phase:<9} {bare_us:>10.1f}  {mine_us:>14.1f}  {math.exp(mean):>6.3f}  "
              f"{low * 100:>+6.1f}..{high * 100:>+5.1f}%  {verdicts[-1]:>12}  {loose_us:>16.1f}  "
              f"{wrapper_s * 1e6 / bare_us * 100:>12.4f}%")
    return verdicts, share


def _measure(world: int, rounds: int, iters: int) -> list[tuple[tuple[float, float], ...]]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + str(Path(tmp) / "rdzv")
        procs = [ctx.Process(target=_rank, args=(r, world, init, rounds, iters, q)) for r in range(world)]
        for p in procs:
            p.start()
        pairs = q.get(timeout=3600)
        for p in procs:
            p.join(60)
    return pairs


def main() -> int:
    """Spawn the ranks per world size, collect the pairs, print the ratios; exit code 0 when none FAILs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="2,4", help="Rank counts to run, e.g. 2,4.")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    shape = ", ".join(f"{k} {v}" for k, v in SHAPE.items())
    print(f"bench moe vs a bare all_to_all_single loop, gloo ranks; {shape}; {args.iters} iterations per timing, "
          f"{args.rounds} adjacent pairs")
    print(f"{'ranks':>5}  {'phase':<9} {'bare (us)':>10}  {'bench moe (us)':>14}  {'ratio':>6}  {'95% interval':>15}  "
          f"{'direct':>12}  {'no barrier (us)':>16}  {'timer share':>13}")
    wrapper_s = _wrapper_overhead_s()
    verdicts, shares = [], []
    for world in (int(w) for w in args.worlds.split(",")):
        direct, share = _report(world, _measure(world, args.rounds, args.iters), wrapper_s)
        verdicts += direct
        shares.append(share)
    print(f"bench moe's timer costs {wrapper_s * 1e9:.0f} ns per exchange more than a bare clock (measured with a "
          "stub collective); the timer share is that over the bare exchange time")
    print(f"limit: within {TOLERANCE * 100:.0f}% of the bare loop; direct comparisons: {verdicts.count('PASS')} PASS, "
          f"{verdicts.count('INCONCLUSIVE')} INCONCLUSIVE, {verdicts.count('FAIL')} FAIL; largest timer share "
          f"{max(shares) * 100:.4f}%")
    verdict = "PASS" if max(shares) < TOLERANCE and "FAIL" not in verdicts else "FAIL"
    print(f"verdict: {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
