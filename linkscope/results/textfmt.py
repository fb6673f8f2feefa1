"""The nccl-tests text table, line by line, so linkscope output can be diffed against nccl-tests output.

Formats follow nccl-tests `src/common.cu` / `src/util.cu`: leading fields `%12li  %12li  %8s  %6s  %6s`,
then per placement `  %7s  %6.2f  %6.2f  %6g`, with the time printed with 2, 1 or 0 decimals by magnitude.
"""

from __future__ import annotations

from collections.abc import Iterable

from linkscope.results.records import CollectiveRow

HEADER_LINES = (
    "#                                                              out-of-place                       in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
)


def format_time_us(time_us: float) -> str:
    """nccl-tests' time column: 7 wide, fewer decimals as the number grows."""
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    if time_us >= 100.0:
        return f"{time_us:7.1f}"
    return f"{time_us:7.2f}"


def _half(row: CollectiveRow | None) -> str:
    if row is None:
        return f"  {'N/A':>7s}  {'N/A':>6s}  {'N/A':>6s}  {'N/A':>6s}"
    wrong = "N/A" if row.nwrong is None else f"{row.nwrong:g}"
    return f"  {format_time_us(row.time_us)}  {row.algbw:6.2f}  {row.busbw:6.2f}  {wrong:>6s}"


def format_row(out_of_place: CollectiveRow | None, in_place: CollectiveRow | None) -> str:
    """One data line: the size's leading fields, then the out-of-place and in-place halves."""
    ref = out_of_place or in_place
    if ref is None:
        raise ValueError("a row needs at least one placement")
    root = str(ref.root)
    lead = f"{ref.size_bytes:12d}  {ref.count:12d}  {ref.dtype:>8s}  {ref.redop:>6s}  {root:>6s}"
    return lead + _half(out_of_place) + _half(in_place)


def pair_rows(rows: Iterable[CollectiveRow]) -> list[tuple[CollectiveRow | None, CollectiveRow | None]]:
    """Group rows of one op into (out_of_place, in_place) pairs per size, in size order."""
    by_size: dict[tuple[int, str, str, int], list[CollectiveRow | None]] = {}
    for row in rows:
        key = (row.size_bytes, row.dtype, row.redop, row.root)
        slot = by_size.setdefault(key, [None, None])
        slot[0 if row.placement == "out_of_place" else 1] = row
    return [(pair[0], pair[1]) for _, pair in sorted(by_size.items(), key=lambda kv: kv[0][0])]


def avg_bus_bandwidth(rows: Iterable[CollectiveRow]) -> float:
    """nccl-tests' footer figure: the plain mean of busbw over every printed half-row."""
    values = [row.busbw for row in rows]
    return sum(values) / len(values) if values else 0.0


def footer_lines(rows: list[CollectiveRow]) -> list[str]:
    """The out-of-bounds and average-bus-bandwidth footer."""
    wrong = sum(row.nwrong or 0 for row in rows)
    verdict = "OK" if wrong == 0 else "FAILED"
    return [
        f"# Out of bounds values : {wrong} {verdict}",
        f"# Avg bus bandwidth    : {avg_bus_bandwidth(rows):g} ",
        "#",
    ]


def format_table(rows: list[CollectiveRow]) -> str:
    """A whole nccl-tests style table for the rows of one op, header and footer included."""
    lines = list(HEADER_LINES)
    lines += [format_row(out, inp) for out, inp in pair_rows(rows)]
    lines += footer_lines(rows)
    return "\n".join(lines)
