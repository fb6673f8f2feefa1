"""Values no nccl-tests run can print: a row holding one makes the whole import refused, before a run exists.

A misread or hand-edited file must not reach the store half-imported (a 23-digit size overflows SQLite's
int64 after the run was created) nor be averaged into calibrations (a zero time gives infinite bandwidth).
"""

from __future__ import annotations

from linkscope.results.records import CollectiveRow

MAX_SIZE_BYTES = 1 << 50
"""1 PiB: far beyond any message nccl-tests sizes (its -e tops out at device memory); also well inside int64."""

KNOWN_DTYPES = frozenset({
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
    "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2", "char", "int", "float16", "float32", "float64",
})
"""nccl-tests' `test_typenames` across versions (plus the torch-style spellings linkscope's own JSON may use)."""


def invalid_reason(row: CollectiveRow) -> str | None:
    """Why this row cannot be a real measurement, or None when it can."""
    if row.size_bytes < 0 or row.size_bytes > MAX_SIZE_BYTES:
        return f"size {row.size_bytes} bytes is out of range (0 to {MAX_SIZE_BYTES})"
    if row.count < 0 or row.count > MAX_SIZE_BYTES:
        return f"count {row.count} is out of range"
    if row.dtype and row.dtype.lower() not in KNOWN_DTYPES:
        return f"unknown data type '{row.dtype}'"
    if row.time_us <= 0:
        return f"time {row.time_us:g} us is not positive"
    if row.algbw < 0 or row.busbw < 0:
        return "negative bandwidth"
    return None
