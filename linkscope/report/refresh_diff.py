"""The text diff `catalog refresh` prints: what changes, what is held back and why, and what matched nothing."""

from __future__ import annotations

from linkscope.hardware.refresh import RefreshReport

_SHOWN_NAMES = 12
"""Unused source types listed by name per cloud; the rest are counted."""


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.4f}".rstrip("0").rstrip(".")


def refresh_lines(report: RefreshReport) -> list[str]:
    """One line per changed or held-back price, region switch and unmatched offering, then the totals."""
    lines = []
    for c in report.changes:
        spot = f" (spot {_money(c.new_spot)})" if c.new_spot is not None else ""
        what = f"{c.offering}: {_money(c.old_price)} -> {_money(c.new_price)}/h{spot} [{c.region}; {c.rows}]"
        if c.changed:
            lines.append(f"held back {what}: {c.held_back}" if c.held_back else what)
        if c.region_switch:
            lines.append(f"region switch {c.offering}: {c.region_switch}")
    for cloud in report.source.skipped_clouds:
        lines.append(f"skipped {cloud}: linkscope has no offerings there")
    for item in report.unmatched:
        lines.append(f"not matched: {item}")
    for cloud, names in report.unused.items():
        more = f" and {len(names) - _SHOWN_NAMES} more" if len(names) > _SHOWN_NAMES else ""
        lines.append(f"{cloud}: {len(names)} source GPU type(s) match no offering: "
                     f"{', '.join(names[:_SHOWN_NAMES])}{more}")
    applied = sum(c.applied for c in report.changes)
    held = sum(1 for c in report.changes if c.changed and c.held_back)
    same = sum(1 for c in report.changes if not c.changed)
    lines.append(f"{len(report.changes)} offering(s) joined from {len(report.source.rows)} source rows: "
                 f"{applied} to apply, {held} held back, {same} unchanged; {len(report.unmatched)} not matched")
    for f in report.source.files.values():
        lines.append(f"source: {f.path}: {f.describe()}")
    return lines
