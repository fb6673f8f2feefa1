"""The columns of an nccl-tests result table and how one printed row becomes CollectiveRows.

The column header names the fields, so the header decides the layout: `error` (before 2.13), `#wrong` and
`root` (2.13+), `i_min i_max i_p99 i_cv%` after each placement (2.19+ with `-I`), a trailing `timestamp`
(`-S`). Without a header the layout is inferred from the number of fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from linkscope.results.nccltests.model import Layout
from linkscope.results.records import CollectiveRow, Placement

_TIME_NAMES = ("time", "cputime")
_PREFIX_NAMES = frozenset({"size", "count", "type", "redop", "root", "bytes", "N", "op"})
_ITER_KEYS = {"i_min": "min_us", "i_max": "max_us", "i_p99": "p99_us", "i_cv%": "cv_pct"}
_TIMESTAMP_FIELDS = 2
"""`-S` prints `%Y-%m-%d %H:%M:%S`: two whitespace-separated fields."""


class RowError(ValueError):
    """A row that looks like data but does not fit the table's columns."""


@dataclass(frozen=True)
class Columns:
    """A result table's layout: the leading fields, the fields printed per placement, a trailing timestamp."""

    prefix: tuple[str, ...]
    half: tuple[str, ...]
    timestamp: bool = False

    @property
    def layout(self) -> Layout:
        """Which nccl-tests generation printed this layout."""
        if "i_min" in self.half:
            return "2.19-I"
        if "error" in self.half or "res" in self.half:
            return "pre-2.13"
        return "2.13" if "#wrong" in self.half else "unknown"

    def field_counts(self) -> tuple[int, int]:
        """(fields with both placements, fields with in-place only) per row."""
        trailing = _TIMESTAMP_FIELDS if self.timestamp else 0
        return len(self.prefix) + 2 * len(self.half) + trailing, len(self.prefix) + len(self.half) + trailing


_STANDARD = ("size", "count", "type", "redop", "root")
_HALF = ("time", "algbw", "busbw", "#wrong")
_HALF_I = _HALF + tuple(_ITER_KEYS)
_BY_FIELD_COUNT: dict[int, Columns] = {
    13: Columns(_STANDARD, _HALF),
    15: Columns(_STANDARD, _HALF, timestamp=True),
    21: Columns(_STANDARD, _HALF_I),
    23: Columns(_STANDARD, _HALF_I, timestamp=True),
    12: Columns(("size", "count", "type", "redop"), ("time", "algbw", "busbw", "error")),
    11: Columns(("size", "count", "type"), ("time", "algbw", "busbw", "error")),
}


def columns_from_header(text: str) -> Columns | None:
    """The layout named by a `#  size  count  type ...  time  algbw  busbw ...` line, or None if it is not one."""
    tokens = text.lstrip("#").split()
    starts = [i for i, t in enumerate(tokens) if t in _TIME_NAMES]
    if len(starts) < 2 or not tokens or tokens[0] not in ("size", "bytes"):
        return None
    prefix, half = tokens[: starts[0]], tokens[starts[0]: starts[1]]
    if not set(prefix) <= _PREFIX_NAMES or "algbw" not in half or "busbw" not in half:
        return None
    rest = tokens[starts[1] + len(half):]
    return Columns(tuple(prefix), tuple(half), timestamp="timestamp" in rest)


def columns_for_row(tokens: list[str]) -> Columns | None:
    """The usual layout with this many fields, for tables printed without their column header."""
    return _BY_FIELD_COUNT.get(len(tokens))


def parse_row(tokens: list[str], columns: Columns) -> list[CollectiveRow]:
    """One printed row -> one CollectiveRow per placement (op, world size and defaults filled in later)."""
    both, in_place_only = columns.field_counts()
    if len(tokens) == both:
        placements: tuple[Placement, ...] = ("out_of_place", "in_place")
    elif len(tokens) == in_place_only:
        placements = ("in_place",)  # nccl-tests leaves out-of-place blank for trace replay
    else:
        raise RowError(f"expected {both} fields for this table's columns, found {len(tokens)}")
    head = dict(zip(columns.prefix, tokens))
    rows = []
    for i, placement in enumerate(placements):
        start = len(columns.prefix) + i * len(columns.half)
        values = dict(zip(columns.half, tokens[start: start + len(columns.half)]))
        rows.append(_row(head, values, placement))
    return rows


def _row(head: dict[str, str], values: dict[str, str], placement: Placement) -> CollectiveRow:
    wrong = values.get("#wrong")
    error = values.get("error", values.get("res"))
    return CollectiveRow(
        op="unknown",
        size_bytes=_int(head.get("size", head.get("bytes")), "size"),
        count=_int(head.get("count", head.get("N")), "count"),
        dtype=head.get("type", ""),
        redop=head.get("redop", head.get("op", "")),
        root=_int(head["root"], "root") if "root" in head else -1,
        placement=placement,
        time_us=_float(values.get("time", values.get("cputime")), "time"),
        algbw=_float(values.get("algbw"), "algbw"),
        busbw=_float(values.get("busbw"), "busbw"),
        nwrong=None if wrong is None or wrong == "N/A" else int(_float(wrong, "#wrong")),
        max_error=None if error is None or error == "N/A" else _float(error, "error"),
        iter_stats={key: _float(values[name], name) for name, key in _ITER_KEYS.items()
                    if values.get(name) not in (None, "N/A")},
    )


def _int(text: str | None, name: str) -> int:
    if text is None:
        raise RowError(f"no {name} field")
    try:
        return int(text)
    except ValueError:
        raise RowError(f"{name} '{text}' is not an integer") from None


def _float(text: str | None, name: str) -> float:
    if text is None:
        raise RowError(f"no {name} field")
    try:
        value = float(text)
    except ValueError:
        raise RowError(f"{name} '{text}' is not a number") from None
    if not math.isfinite(value):
        raise RowError(f"{name} is {text}")
    return value
