"""Timers and the arithmetic around them; the CUDA timers run only where CUDA is."""

from __future__ import annotations

import pytest
import torch

from linkscope.bench.timing import (MAX_ADAPTED_ITERS, CudaGraphTimer, CudaTimer, WallTimer, combine,
                                    iters_for_min_time, make_timer, per_op_seconds)


def test_per_op_time_divides_by_iterations_and_graph_launches() -> None:
    assert per_op_seconds(2.0, 20) == pytest.approx(0.1)
    assert per_op_seconds(2.0, 20, launches=4) == pytest.approx(0.025)
    with pytest.raises(ValueError):
        per_op_seconds(1.0, 0)


@pytest.mark.parametrize(("mode", "expected"), [(0, 3.0), (1, 2.0), (2, 1.0), (3, 3.0)])
def test_combine_modes_match_dash_a(mode: int, expected: float) -> None:
    assert combine([3.0, 1.0, 2.0], mode) == expected


def test_combine_rejects_unknown_modes() -> None:
    with pytest.raises(ValueError):
        combine([1.0], 7)


def test_min_time_raises_iterations_but_never_lowers_them() -> None:
    assert iters_for_min_time(0.001, 0.5, 20) == 500
    assert iters_for_min_time(1.0, 0.5, 20) == 20
    assert iters_for_min_time(0.001, 0.0, 20) == 20
    assert iters_for_min_time(1e-12, 10.0, 20) == MAX_ADAPTED_ITERS


def test_wall_timer_runs_exactly_iters_calls_and_the_per_op_hook() -> None:
    calls: list[str] = []
    per_op = WallTimer().loop_seconds(lambda: calls.append("op"), 7, lambda: calls.append("sync"))
    assert calls == ["op", "sync"] * 7
    assert per_op >= 0.0
    calls.clear()
    WallTimer().loop_seconds(lambda: calls.append("op"), 3, None)
    assert calls == ["op"] * 3


def test_gloo_gets_the_wall_clock_timer() -> None:
    assert isinstance(make_timer("gloo", 0), WallTimer)


cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA timers need a CUDA device")


@cuda_only
def test_nccl_gets_cuda_timers() -> None:
    assert type(make_timer("nccl", 0)) is CudaTimer
    graph_timer = make_timer("nccl", 5)
    assert isinstance(graph_timer, CudaGraphTimer) and graph_timer.launches == 5


@cuda_only
def test_cuda_graph_timer_replays_captured_work() -> None:
    x = torch.zeros(1, device="cuda")
    per_op = CudaGraphTimer(3).loop_seconds(lambda: x.add_(1), 4, None)
    torch.cuda.synchronize()
    assert per_op > 0
    assert x.item() == 12  # 4 captured additions replayed 3 times (capture itself does not run them)
