"""Terminal views of `calibrate` (the fit of a run) and `profiles` (what is saved)."""

from __future__ import annotations

from rich.table import Table

from linkscope.model.calibration.calibrate import OpFit
from linkscope.model.calibration.profiles import Profile


def _busbw(value: float) -> str:
    # A range whose time does not grow with size is pure latency: its fitted bandwidth is unbounded.
    return "-" if value > 1e6 else f"{value:.2f}"


def fit_table(report_fits: dict[str, OpFit], title: str) -> Table:
    """Per op: the size ranges fitted, their latency and bandwidth, and how well the fit matches the run."""
    table = Table(title=title, header_style="bold")
    for name in ("op", "ranks", "sizes", "ranges", "latency (us)", "busbw (GB/s)", "fit error median", "max"):
        table.add_column(name, justify="left" if name == "op" else "right")
    for op, fit in report_fits.items():
        segs = fit.segments
        table.add_row(op, str(fit.ranks), str(fit.points), str(len(segs)),
                      " / ".join(f"{s.alpha_us:.1f}" for s in segs),
                      " / ".join(_busbw(s.busbw_gb_per_s) for s in segs),
                      f"{fit.median_error:.1%}", f"{fit.max_error:.1%}")
    return table


def profiles_table(loaded: list[Profile]) -> Table:
    """Every saved profile: the run it came from, where and what it fitted."""
    table = Table(title=f"{len(loaded)} profiles", header_style="bold")
    for column in ("name", "run", "backend", "ranks", "nodes", "ops", "offering", "created"):
        table.add_column(column)
    for p in loaded:
        table.add_row(p.name, p.run_id, p.backend, str(p.ranks), str(p.nodes),
                      ", ".join(sorted(p.fits) + (["training step"] if p.train is not None else [])),
                      p.offering or "", p.created_at)
    return table
