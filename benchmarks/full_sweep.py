"""Does the default full sweep fit its time budget on a small CPU machine?

Runs `linkscope bench all` with the default options (8 B to 64 MiB, factor 2, 20 iterations, 5 warmup,
check on) on 2 local gloo ranks, and prints its wall time against the 2-minute budget.

    python benchmarks/full_sweep.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from linkscope.bench.config import BenchConfig, RunOptions
from linkscope.bench.runner import run_bench

BUDGET_S = 120.0


def main() -> int:
    """Run the sweep, print the verdict, return the exit code (0 within budget)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = BenchConfig(ops=("all",), run=RunOptions(backend="gloo", nproc=2, db_path=str(Path(tmp) / "runs.db"),
                                                       quiet=True))
        start = time.perf_counter()
        result = run_bench(cfg, emit=lambda line: None)
        wall_s = time.perf_counter() - start
    sizes = len(cfg.sizes())
    print(f"full sweep: {len(result.rows)} rows (9 ops x {sizes} sizes x 2 placements), status {result.status}")
    print(f"cores: {os.cpu_count()}, wall time: {wall_s:.1f} s, budget: {BUDGET_S:.0f} s, "
          f"ratio: {wall_s / BUDGET_S:.2f}")
    ok = result.exit_code == 0 and wall_s <= BUDGET_S
    print(f"verdict: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
