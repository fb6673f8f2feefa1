"""Does linkscope's harness make a fabric look slower than it is?

On 2 local gloo ranks, for all_reduce from 1 MiB to 64 MiB, compares the per-operation time linkscope
reports with a bare `dist.all_reduce` loop in the same processes. linkscope's side is its own code:
the buffers and call from `linkscope.bench.ops`, timed by `linkscope.bench.sweep.time_placement` (one
sync operation and a barrier, the wall clock around back-to-back calls, the mean over ranks). The bare
side is a plain loop over the same tensor, timed the same way.

Two measurements:

1. Direct: the two loops in adjacent pairs (alternating which goes first), at every size. Loopback
   gloo on a small machine varies a lot from one operation to the next (a 1 MiB all_reduce can take
   1 ms or 10 ms), so each size gets the mean of the per-pair log ratios with its 95% confidence
   interval: within +-3% is PASS, wholly outside is FAIL, otherwise INCONCLUSIVE (too noisy to tell).
2. Isolated: the only code that differs inside the two timed regions is linkscope's loop wrapper (a
   prepared call object, the loop, the final wait). With `dist.all_reduce` replaced by a stub that
   returns at once, the wrapper's extra cost per call is measured precisely and shown as a share of
   the real all_reduce time at each size: an upper bound on what the harness can add.

Verdict: PASS when the isolated share is below 3% at every size and no direct comparison FAILs.

    python benchmarks/harness_overhead.py [--rounds 24] [--iters 10]
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

SIZES = [2**20 * (2**k) for k in range(7)]  # 1 MiB .. 64 MiB
WARMUP = 5
TOLERANCE = 0.03
T_95 = 2.0  # two-sided 95% quantile of Student's t for 20+ pairs, rounded up


def _bare(buf: Any, iters: int, world: int) -> float:
    """A plain loop around dist.all_reduce: seconds per operation, mean over ranks."""
    import torch
    import torch.distributed as dist

    dist.all_reduce(buf)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed)
    return float(elapsed.item()) / world


def _pairs(ctx: Any, size_bytes: int, rounds: int, iters: int) -> list[tuple[float, float]]:
    """(bare, linkscope) seconds per operation, `rounds` adjacent pairs at one size."""
    import torch

    from linkscope.bench.config import BenchConfig
    from linkscope.bench.ops import OPS, Peers, alloc_buffers, bind
    from linkscope.bench.sizes import coll_counts
    from linkscope.bench.sweep import time_placement

    cfg = BenchConfig(iters=iters, warmup=WARMUP, check=0)
    counts = coll_counts("same", size_bytes, 4, ctx.world)
    bufs = alloc_buffers(counts, torch.float32, ctx.device)
    bufs.send.fill_(1)
    bufs.recv.fill_(1)
    bound = bind(OPS["all_reduce"], bufs, counts, "out_of_place", Peers(ctx.rank, ctx.world, 0, "sum"))
    # The bare loop works on the same tensor, so memory placement cannot tell the two apart.
    bare_buf = bufs.recv
    for _ in range(WARMUP):
        bound.call()
        _bare(bare_buf, 1, ctx.world)
    out = []
    for index in range(rounds):
        if index % 2 == 0:
            bare = _bare(bare_buf, iters, ctx.world)
            mine = time_placement(ctx, bound, iters, cfg)
        else:
            mine = time_placement(ctx, bound, iters, cfg)
            bare = _bare(bare_buf, iters, ctx.world)
        out.append((bare, mine))
    return out


def _rank(rank: int, world: int, init_method: str, rounds: int, iters: int, q: Any) -> None:
    from linkscope.bench.comm import init_rank
    from linkscope.bench.layout import RankEnv

    ctx = init_rank(RankEnv(rank, world, rank, world, 0), "gloo", init_method, 600.0, lambda value: None)
    results = {size: _pairs(ctx, size, rounds, iters) for size in SIZES}
    if rank == 0:
        q.put(results)
    ctx.close()


def _wrapper_overhead_s(calls: int = 200_000, repeats: int = 5) -> float:
    """Extra seconds per call of linkscope's timed loop over a bare loop, with a stub for the collective."""
    import torch
    import torch.distributed as dist

    from linkscope.bench.ops import OPS, Peers, alloc_buffers, bind
    from linkscope.bench.sizes import coll_counts
    from linkscope.bench.timing import WallTimer

    def stub(tensor: Any, op: Any = None, group: Any = None, async_op: bool = False) -> None:
        return None

    real, dist.all_reduce = dist.all_reduce, stub  # type: ignore[assignment]
    try:
        counts = coll_counts("same", 1024, 4, 2)
        bound = bind(OPS["all_reduce"], alloc_buffers(counts, torch.float32, torch.device("cpu")), counts,
                     "out_of_place", Peers(0, 2, 0, "sum"))
        buf = torch.ones(4)
        best_mine = best_bare = math.inf
        for _ in range(repeats):
            best_mine = min(best_mine, WallTimer().loop_seconds(bound.call, calls, None))
            start = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(buf)
            best_bare = min(best_bare, (time.perf_counter() - start) / calls)
    finally:
        dist.all_reduce = real  # type: ignore[assignment]
    return max(0.0, best_mine - best_bare)


def _verdict(low: float, high: float) -> str:
    if low >= -TOLERANCE and high <= TOLERANCE:
        return "PASS"
    if high < -TOLERANCE or low > TOLERANCE:
        return "FAIL"
    return "INCONCLUSIVE"


def _report(results: dict[int, list[tuple[float, float]]], iters: int, wrapper_s: float) -> str:
    rounds = len(next(iter(results.values())))
    print(f"all_reduce, 2 gloo ranks, {iters} iterations per timing, {rounds} adjacent pairs per size")
    print(f"linkscope's loop wrapper costs {wrapper_s * 1e9:.0f} ns per call more than a bare loop "
          "(measured with a stub collective)")
    print(f"{'size (B)':>10}  {'bare (us)':>10}  {'linkscope (us)':>14}  {'ratio':>6}  {'95% interval':>15}  "
          f"{'direct':>12}  {'wrapper share':>13}")
    direct, shares = [], []
    for size, pairs in results.items():
        logs = [math.log(mine / bare) for bare, mine in pairs]
        mean = statistics.fmean(logs)
        half = T_95 * statistics.stdev(logs) / math.sqrt(len(logs))
        low, high = math.exp(mean - half) - 1, math.exp(mean + half) - 1
        bare_us = statistics.median(b for b, _ in pairs) * 1e6
        mine_us = statistics.median(m for _, m in pairs) * 1e6
        share = wrapper_s * 1e6 / bare_us
        direct.append(_verdict(low, high))
        shares.append(share)
        print(f"{size:>10}  {bare_us:>10.1f}  {mine_us:>14.1f}  {math.exp(mean):>6.3f}  "
              f"{low * 100:>+6.1f}..{high * 100:>+5.1f}%  {direct[-1]:>12}  {share * 100:>12.4f}%")
    ok = max(shares) < TOLERANCE and "FAIL" not in direct
    print(f"limit: within {TOLERANCE * 100:.0f}% of the bare loop at every size; direct comparisons: "
          f"{direct.count('PASS')} PASS, {direct.count('INCONCLUSIVE')} INCONCLUSIVE, {direct.count('FAIL')} FAIL; "
          f"largest wrapper share {max(shares) * 100:.4f}%")
    verdict = "PASS" if ok else "FAIL"
    print(f"verdict: {verdict}")
    return verdict


def main() -> int:
    """Spawn the ranks, collect the pairs, print the comparison; exit code 0 on PASS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + str(Path(tmp) / "rdzv")
        procs = [ctx.Process(target=_rank, args=(r, 2, init, args.rounds, args.iters, q)) for r in range(2)]
        for p in procs:
            p.start()
        results = q.get(timeout=3600)
        for p in procs:
            p.join(60)
    return 0 if _report(results, args.iters, _wrapper_overhead_s()) == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
