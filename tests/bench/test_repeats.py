"""`--repeat K`: one stored row per size with mean time and the spread."""

from __future__ import annotations

import pytest

from linkscope.bench.repeats import aggregate
from linkscope.results.records import CollectiveRow


def _row(time_us: float, nwrong: int | None = 0) -> CollectiveRow:
    # 1e6 bytes in time_us microseconds -> algbw in GB/s; two ranks, so busbw = algbw for all_reduce.
    algbw = 1e6 / 1e9 / (time_us * 1e-6)
    return CollectiveRow("all_reduce", 1_000_000, 250_000, "float", "sum", -1, "out_of_place", time_us, algbw,
                         algbw, nwrong, world_size=2, iters=20, times_us=[time_us])


def test_mean_time_and_bandwidth_from_the_mean() -> None:
    row = aggregate([_row(100.0), _row(200.0), _row(300.0)])
    assert row.time_us == pytest.approx(200.0)
    assert row.algbw == pytest.approx(1e6 / 1e9 / 200e-6)
    assert row.busbw == pytest.approx(row.algbw)
    assert (row.time_us_min, row.time_us_max) == (100.0, 300.0)
    assert row.time_us_stdev == pytest.approx(100.0)
    assert row.repeats == 3 and row.times_us == [100.0, 200.0, 300.0]


def test_single_repeat_has_no_stdev() -> None:
    row = aggregate([_row(50.0)])
    assert row.time_us_stdev is None and row.repeats == 1


def test_wrong_elements_add_up_and_unchecked_stays_unchecked() -> None:
    assert aggregate([_row(1.0, 2), _row(1.0, 3)]).nwrong == 5
    assert aggregate([_row(1.0, None), _row(1.0, None)]).nwrong is None
