"""Print CollectiveRows exactly as nccl-tests prints its result table (src/util.cu), so the two can be diffed.

Pure functions of rows. The pieces (header, one line, footer) are public too, so a benchmark can print each
line as soon as its size is measured, like nccl-tests does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from linkscope.results.busbw import OP_TO_BINARY
from linkscope.results.records import CollectiveRow

_NULL_BODY = " " * 32
"""What nccl-tests prints in place of a placement that was not run."""


def format_float(value: float, width: int) -> str:
    """nccl-tests' `getFloatStr`: 2 decimals while they fit in `width`, then 1, then 0, then an exponent."""
    if not math.isfinite(value):
        return f"{value:>{width}}"
    power, bound = 0, 1
    while value >= bound:
        power, bound = power + 1, bound * 10
    if power < width - 2:
        return "%*.2f" % (width, value)
    if power < width - 1:
        return "%*.1f" % (width, value)
    if power < width + 1:
        return "%*.0f" % (width, value)
    return "%*.1e" % (width, value) if width >= 7 else "%*.0e" % (width, value)


def format_table_header() -> str:
    """The column header nccl-tests prints before the first row (four lines)."""
    names = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
             "time", "algbw", "busbw", "#wrong")
    units = ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
    columns = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n"
    return ("#\n"
            + "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n"
            % ("", "", "", "", "")
            + columns % (*names, 0, "") + columns % (*units, 0, ""))


def format_table_row(out_of_place: CollectiveRow | None, in_place: CollectiveRow | None) -> str:
    """One size's line: leading fields, then out-of-place and in-place (blank where not run)."""
    first = out_of_place or in_place
    if first is None:
        raise ValueError("a table row needs at least one placement")
    line = "%12li  %12li  %8s  %6s  %6s" % (first.size_bytes, first.count, first.dtype, first.redop,
                                             "%6i" % first.root)
    line += _body(out_of_place) if out_of_place else _NULL_BODY
    return line + (_body(in_place) if in_place else "") + "\n"


def _body(row: CollectiveRow) -> str:
    times = (format_float(row.time_us, 7), format_float(row.algbw, 6), format_float(row.busbw, 6))
    if row.nwrong is None:
        return "  %7s  %6s  %6s    N/A" % times
    return "  %7s  %6s  %6s  %6g" % (*times, float(row.nwrong))


def avg_busbw(rows: Sequence[CollectiveRow]) -> float:
    """nccl-tests' `Avg bus bandwidth`: the plain mean of busbw over every printed placement (0 if none)."""
    return sum(r.busbw for r in rows) / len(rows) if rows else 0.0


def format_table_footer(rows: Sequence[CollectiveRow], check_avg_bw: float | None = None,
                        program_name: str | None = None) -> str:
    """`Out of bounds values`, `Avg bus bandwidth` (OK/FAILED against 0.9 x `check_avg_bw` when given), end line."""
    errors = sum(1 for r in rows if r.nwrong)
    avg = avg_busbw(rows)
    verdict = "" if check_avg_bw is None else ("FAILED" if avg < check_avg_bw * 0.9 else "OK")
    program = program_name or (OP_TO_BINARY.get(rows[0].op, rows[0].op) if rows else "unknown")
    return ("# %-20s : %d %s\n" % ("Out of bounds values", errors, "FAILED" if errors else "OK")
            + "# %-20s : %g %s\n" % ("Avg bus bandwidth", avg, verdict)
            + "#\n# Collective test concluded: %s\n" % program)


def paired(rows: Sequence[CollectiveRow]) -> Iterator[tuple[CollectiveRow | None, CollectiveRow | None]]:
    """Rows as printed lines: an out-of-place row followed by the in-place row of the same size and type.

    Pairs by order, not by size, because nccl-tests can print the same size twice (all-gather rounds small
    sizes down to 0 bytes).
    """
    pending: CollectiveRow | None = None
    for row in rows:
        if row.placement == "out_of_place":
            if pending is not None:
                yield pending, None
            pending = row
        elif pending is not None and _same_line(pending, row):
            yield pending, row
            pending = None
        else:
            if pending is not None:
                yield pending, None
                pending = None
            yield None, row
    if pending is not None:
        yield pending, None


def _same_line(a: CollectiveRow, b: CollectiveRow) -> bool:
    return (a.size_bytes, a.count, a.dtype, a.redop, a.root) == (b.size_bytes, b.count, b.dtype, b.redop, b.root)


def format_nccl_tests_table(rows: Sequence[CollectiveRow], check_avg_bw: float | None = None) -> str:
    """The nccl-tests result table for `rows`: one table (header, lines, footer) per op and world size, in
    order of first appearance, as a script running one nccl-tests binary after another would print them."""
    groups = list(dict.fromkeys((r.op, r.world_size) for r in rows))
    tables = []
    for group in groups:
        mine = [r for r in rows if (r.op, r.world_size) == group]
        body = "".join(format_table_row(oop, ip) for oop, ip in paired(mine))
        tables.append(format_table_header() + body + format_table_footer(mine, check_avg_bw))
    return "".join(tables)


def format_imported_tables(rows: Sequence[CollectiveRow], sections: Sequence[dict[str, Any]]) -> str | None:
    """An imported run's tables as its file had them: each section's rows under the column header, and only the
    footer lines the file printed, with the file's own figures (an average recomputed from rounded rows, or an
    `Out of bounds` line the file never had, would put words in its mouth). None when `sections` do not account
    for the rows (an older import): the caller prints the recomputed table instead."""
    counts = [int(s.get("rows") or 0) for s in sections]
    if sum(counts) != len(rows):
        return None
    out, start = [], 0
    for section, count in zip(sections, counts):
        mine = list(rows[start:start + count])
        start += count
        if not mine:
            continue
        out.append(format_table_header() + "".join(format_table_row(oop, ip) for oop, ip in paired(mine)))
        if section.get("out_of_bounds") is not None:
            ok = section.get("out_of_bounds_ok")
            out.append("# %-20s : %d %s\n" % ("Out of bounds values", section["out_of_bounds"],
                                              "OK" if ok or ok is None else "FAILED"))
        if section.get("avg_busbw") is not None:
            out.append("# %-20s : %g \n" % ("Avg bus bandwidth", section["avg_busbw"]))
        if section.get("concluded"):
            out.append("#\n# Collective test concluded: %s\n" % (section.get("binary") or OP_TO_BINARY.get(mine[0].op,
                                                                                                        mine[0].op)))
    return "".join(out)
