"""The text `catalog refresh` prints: what changes, what is held back and why, every source row not used, what
matched nothing, and with --apply what the override file gained, replaced and kept."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from linkscope.hardware.refresh import RefreshReport
from linkscope.hardware.refresh_rows import RejectedRow
from linkscope.hardware.refresh_write import Merged

_SHOWN_NAMES = 12
"""Unused source types listed by name per cloud; the rest are counted."""
_ONE_BY_ONE = frozenset({"conflicting repeat", "spot above on-demand"})
"""Non-blocking rejections that change a price: each is printed on its own line, not grouped."""


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.4f}".rstrip("0").rstrip(".")


def line_ranges(lines: Iterable[int]) -> str:
    """`3, 4, 5, 9` -> `3-5, 9`."""
    ordered = sorted(set(lines))
    out: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(out)


def skipped_lines(rejected: list[RejectedRow]) -> list[str]:
    """Non-blocking rejections: those that change a price one per line, the rest grouped by file and kind."""
    lines: list[str] = []
    groups: dict[tuple[str, str], list[int]] = {}
    for r in rejected:
        if r.blocking:
            continue
        if r.kind in _ONE_BY_ONE:
            lines.append(f"skipped {r}")
        else:
            groups.setdefault((r.origin, r.kind), []).append(r.line)
    for (origin, kind), numbers in groups.items():
        lines.append(f"skipped {origin} line(s) {line_ranges(numbers)}: {kind} ({len(numbers)} row(s))")
    return lines


def refresh_lines(report: RefreshReport) -> list[str]:
    """One line per changed or held-back price, region switch, skipped row and unmatched offering, then totals."""
    lines = []
    for c in report.changes:
        spot = f" (spot {_money(c.new_spot)})" if c.new_spot is not None else ""
        what = f"{c.offering}: {_money(c.old_price)} -> {_money(c.new_price)}/h{spot} [{c.region}; {c.rows}]"
        if c.changed:
            lines.append(f"held back {what}: {c.held_back}" if c.held_back else what)
        if c.region_switch:
            lines.append(f"region switch {c.offering}: {c.region_switch}")
    lines += skipped_lines(report.source.rejected)
    for cloud in report.source.skipped_clouds:
        lines.append(f"skipped {cloud}: linkscope has no offerings there")
    for item in report.unmatched:
        lines.append(f"not matched: {item}")
    for cloud, names in report.unused.items():
        more = f" and {len(names) - _SHOWN_NAMES} more" if len(names) > _SHOWN_NAMES else ""
        lines.append(f"{cloud}: {len(names)} source GPU type(s) match no offering: "
                     f"{', '.join(names[:_SHOWN_NAMES])}{more}")
    lines += [f"note: {n}" for n in report.source.notes]
    applied = sum(c.applied for c in report.changes)
    held = sum(1 for c in report.changes if c.changed and c.held_back)
    same = sum(1 for c in report.changes if not c.changed)
    lines.append(f"{len(report.changes)} offering(s) joined from {len(report.source.rows)} source rows: "
                 f"{applied} to apply, {held} held back, {same} unchanged; {len(report.unmatched)} not matched")
    for f in report.source.files.values():
        dated = "" if f.commit_date else f" ({f.dated_by})"
        lines.append(f"source: {f.path}: {f.describe()}{dated}")
    return lines


def _priced(entry: dict[str, Any]) -> str:
    return f"{_money(entry.get('price_per_hour'))}/h ({entry.get('price_as_of') or 'undated'})"


def merge_lines(merged: Merged) -> list[str]:
    """What --apply did to the override file: each entry added, replaced (old -> new, both dated) and kept."""
    lines = []
    for change, entry in merged.added:
        lines.append(f"added {change.offering}: {_money(change.old_price)}/h shipped, {change.old_as_of} -> "
                     f"{_priced(entry)}")
    for old, new in merged.replaced:
        lines.append(f"replaced {new['offering']}: {_priced(old)} -> {_priced(new)}")
    for old in merged.kept:
        lines.append(f"kept {old['offering']}: {_priced(old)}")
    lines.append(f"wrote {merged.path}: {len(merged.added)} added, {len(merged.replaced)} replaced, "
                 f"{len(merged.kept)} kept")
    return lines
