"""Timers: how long `iters` back-to-back operations take, per backend, the way nccl-tests times them.

nccl-tests runs a CPU wall clock from the first launch until the stream is synchronised, and divides
by the operation count (and by the graph launches with `-G`). linkscope does the same:

- gloo: the calls run on the CPU and return when done, so the wall clock around the loop is the time.
  They are issued synchronously on purpose: ProcessGroupGloo runs asynchronous work on a pool of
  threads, which would overlap consecutive collectives, something nccl-tests' single stream never does.
- nccl: device-side timing. CUDA events on the current stream bracket the loop; a synchronous collective
  makes the current stream wait for NCCL's stream, so the end event fires when the last operation has
  finished on the GPU. Unlike nccl-tests' host clock this leaves out the first launch's host latency,
  which only matters at the smallest sizes.
- nccl with `-G N`: the `iters` calls are captured once in a CUDA graph, and events bracket N replays.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

Call = Callable[[], object]


def per_op_seconds(elapsed_s: float, iters: int, launches: int = 1) -> float:
    """nccl-tests' `deltaSec`: elapsed time over operations issued (iters per launch times launches)."""
    if iters < 1 or launches < 1:
        raise ValueError("iters and launches must be at least 1")
    return elapsed_s / (iters * launches)


def combine(values: list[float], mode: int) -> float:
    """Combine per-rank times as `-a` does: 0 rank 0, 1 mean, 2 min, 3 max."""
    if not values:
        raise ValueError("no values to combine")
    if mode == 0:
        return values[0]
    if mode == 1:
        return sum(values) / len(values)
    if mode == 2:
        return min(values)
    if mode == 3:
        return max(values)
    raise ValueError(f"unknown -a mode {mode}")


MAX_ADAPTED_ITERS = 1_000_000


def iters_for_min_time(per_op_estimate_s: float, min_time_s: float, base_iters: int) -> int:
    """How many iterations make a timed loop last at least `min_time_s` (never fewer than `base_iters`)."""
    if min_time_s <= 0 or per_op_estimate_s <= 0:
        return base_iters
    wanted = math.ceil(min_time_s / per_op_estimate_s)
    return max(base_iters, min(wanted, MAX_ADAPTED_ITERS))


class Timer(Protocol):
    """Times a loop of calls and knows how to wait for outstanding work."""

    def wait(self) -> None:
        """Block until every issued operation has completed."""

    def loop_seconds(self, call: Call, iters: int, after_each: Call | None) -> float:
        """Seconds per operation for `iters` back-to-back calls (`after_each` runs inside the clock)."""


def _run_loop(call: Call, iters: int, after_each: Call | None) -> None:
    # Two loop bodies so that the default (non-blocking) path does nothing per iteration but the call.
    if after_each is None:
        for _ in range(iters):
            call()
    else:
        for _ in range(iters):
            call()
            after_each()


def _timed_loop(call: Call, iters: int, after_each: Call | None, wait: Call) -> float:
    start = time.perf_counter()
    _run_loop(call, iters, after_each)
    wait()
    return time.perf_counter() - start


class WallTimer:
    """gloo: operations are complete when the call returns."""

    def wait(self) -> None:
        """Nothing is outstanding on the CPU backend."""

    def loop_seconds(self, call: Call, iters: int, after_each: Call | None) -> float:
        """Wall clock around the loop."""
        return per_op_seconds(_timed_loop(call, iters, after_each, self.wait), iters)


class CudaTimer:
    """nccl: CUDA events on the current stream around the loop (device-side time)."""

    def __init__(self) -> None:
        import torch

        self._cuda = torch.cuda

    def wait(self) -> None:
        """Synchronise the current device."""
        self._cuda.synchronize()

    def _device_seconds(self, run: Call) -> float:
        """Seconds the GPU spent between two events recorded around `run`."""
        self.wait()
        start, end = self._cuda.Event(enable_timing=True), self._cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def loop_seconds(self, call: Call, iters: int, after_each: Call | None) -> float:
        """Device time of `iters` back-to-back calls."""
        return per_op_seconds(self._device_seconds(lambda: _run_loop(call, iters, after_each)), iters)


class CudaGraphTimer(CudaTimer):
    """nccl with `-G N`: capture `iters` calls in one CUDA graph, replay it N times."""

    def __init__(self, launches: int) -> None:
        super().__init__()
        self.launches = launches

    def loop_seconds(self, call: Call, iters: int, after_each: Call | None) -> float:
        """Capture once (untimed), then time the replays."""
        import torch

        if after_each is not None:
            raise ValueError("per-operation synchronisation cannot be captured in a CUDA graph")
        graph = torch.cuda.CUDAGraph()
        self.wait()
        with torch.cuda.graph(graph):
            for _ in range(iters):
                call()
        replay = graph.replay
        elapsed_s = self._device_seconds(lambda: _run_loop(replay, self.launches, None))
        return per_op_seconds(elapsed_s, iters, self.launches)


def make_timer(backend: str, cudagraph: int) -> Timer:
    """The timer for a backend, chosen at run time."""
    if backend == "nccl":
        return CudaGraphTimer(cudagraph) if cudagraph > 0 else CudaTimer()
    return WallTimer()
