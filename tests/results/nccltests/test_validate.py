"""Rows no nccl-tests run prints are recognised (text and JSON readers both refuse them)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from linkscope.results.nccltests.validate import MAX_SIZE_BYTES, invalid_reason
from linkscope.results.records import CollectiveRow

GOOD = CollectiveRow(op="all_reduce", size_bytes=1024, count=256, dtype="float", redop="sum", root=-1,
                     placement="out_of_place", time_us=12.5, algbw=0.08, busbw=0.15, nwrong=0)


def test_a_plausible_row_passes() -> None:
    assert invalid_reason(GOOD) is None
    assert invalid_reason(replace(GOOD, size_bytes=0, dtype="bfloat16")) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(size_bytes=-8), "size -8 bytes is out of range"),
        (dict(size_bytes=MAX_SIZE_BYTES + 1), "out of range"),
        (dict(size_bytes=10**22), "out of range"),
        (dict(count=-1), "count -1"),
        (dict(dtype="banana"), "unknown data type 'banana'"),
        (dict(time_us=0.0), "not positive"),
        (dict(time_us=-1.0), "not positive"),
        (dict(busbw=-1.0), "negative bandwidth"),
    ],
)
def test_impossible_values_are_named(change: dict, message: str) -> None:
    reason = invalid_reason(replace(GOOD, **change))
    assert reason is not None and message in reason
