"""Speed of the training model: layouts priced per second, vectorized vs one at a time, and `predict train`
end to end against the one-second budget.

    python benchmarks/model_speed.py
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np

from linkscope.hardware.loader import load_db
from linkscope.model.comm.collectives import collective_time
from linkscope.model.step import train
from linkscope.model.step.layout import Layouts
from linkscope.model.step.search import LayoutRequest, enumerate_layouts
from linkscope.model.step.job import Job
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import model_presets

TARGET_LAYOUTS = 100_000
ONE_BY_ONE = 300


def _candidates(job: Job, system) -> Layouts:  # type: ignore[no-untyped-def]
    base = enumerate_layouts(job, system, LayoutRequest(cp=None))
    reps = -(-TARGET_LAYOUTS // len(base))
    return base.take(np.tile(np.arange(len(base)), reps)[:TARGET_LAYOUTS])


def main() -> None:
    db = load_db(include_user=False)
    system = db.systems["dgx-h100"].with_gpus(4096)
    model = model_presets()["megatron-1t"]
    job = Job(model=model, global_batch=2048, seq_len=2048)
    layouts = _candidates(job, system)
    estimate_steps(job, system, layouts.take(np.arange(10)))  # warm caches and imports
    start = time.perf_counter()
    estimate_steps(job, system, layouts)
    vector_s = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(ONE_BY_ONE):
        estimate_steps(job, system, layouts.take(i))
    single_s = time.perf_counter() - start
    vector_rate, single_rate = len(layouts) / vector_s, ONE_BY_ONE / single_s
    print(f"{len(layouts):,} layouts of megatron-1t on 4096 H100s priced in {vector_s:.2f} s: "
          f"{vector_rate:,.0f} layouts/s (target: 100k in under 1 s)")
    print(f"one layout per call: {single_rate:,.0f} layouts/s; vectorized is {vector_rate / single_rate:,.0f}x faster")
    per_element_s = _per_element_collectives_s(job, system, layouts)
    print(f"every collective priced per layout instead of once per distinct (size, ranks, nodes): "
          f"{len(layouts) / per_element_s:,.0f} layouts/s; pricing distinct shapes once is "
          f"{per_element_s / vector_s:.2f}x faster")
    cmd = [sys.executable, "-m", "linkscope", "predict", "train", "--system", "dgx-a100", "--gpus", "64",
           "--model", "llama2-70b", "--global-batch", "512", "--json"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall_s = time.perf_counter() - start
    print(f"`linkscope predict train` (llama2-70b, 64 A100s, layout searched) end to end: {wall_s:.2f} s "
          f"({wall_s:.0%} of the 1 s budget)")


def _per_element_collectives_s(job: Job, system, layouts: Layouts) -> float:  # type: ignore[no-untyped-def]
    """The search's time with the step model's collectives priced element by element, as before they were priced
    once per distinct shape: the reference the dedup is measured against, in the same run."""
    distinct = train._coll_vector_s
    train._coll_vector_s = lambda op, tiers, size, ranks, nodes: (  # type: ignore[assignment]
        collective_time(op, tiers, size, ranks, nodes, labels=False).time_us * 1e-6)
    try:
        start = time.perf_counter()
        estimate_steps(job, system, layouts)
        return time.perf_counter() - start
    finally:
        train._coll_vector_s = distinct


if __name__ == "__main__":
    main()
