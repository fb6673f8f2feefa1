"""Terminal views of `calibrate` (the fit of a run) and `profiles` (what is saved)."""

from __future__ import annotations

from rich.table import Table

from linkscope.model.calibration.calibrate import OpFit
from linkscope.model.calibration.profiles import Profile


def _busbw(value: float) -> str:
    # A range whose time does not grow with size is pure latency: its fitted bandwidth is unbounded.
    return "-" if value > 1e6 else f"{value:.2f}"


ROUGH_FIT_ERROR = 0.5
"""A fit whose median error on its own run exceeds this predicts little; `calibrate` says so."""


def rough_fit_warnings(profile: Profile) -> list[str]:
    """One warning per fit that misses its own run by more than `ROUGH_FIT_ERROR` (median)."""
    errors = {op: (f.median_error, f.max_error) for op, f in profile.fits.items()}
    if profile.train is not None:
        errors["training step"] = (float(profile.train["median_error"]), float(profile.train["max_error"]))
    return [f"warning: the {op} fit misses its own run by {median:.0%} (median; max {worst:.0%}), so predictions "
            f"from profile {profile.name} are rough; measure more sizes or steps, or on a quieter machine"
            for op, (median, worst) in errors.items() if median > ROUGH_FIT_ERROR]


def fit_table(report_fits: dict[str, OpFit], title: str) -> Table:
    """Per op: the size ranges fitted, their latency and bandwidth, and how well the fit matches the run."""
    table = Table(title=title, header_style="bold")
    # Short headers keep the op name and the figures whole at 80 columns.
    for name in ("op", "ranks", "sizes", "ranges", "alpha us", "busbw GB/s", "err med", "max"):
        table.add_column(name, justify="left" if name == "op" else "right", no_wrap=name in ("op", "err med", "max"))
    for op, fit in report_fits.items():
        segs = fit.segments
        table.add_row(op, str(fit.ranks), str(fit.points), str(len(segs)),
                      " / ".join(f"{s.alpha_us:.1f}" for s in segs),
                      " / ".join(_busbw(s.busbw_gb_per_s) for s in segs),
                      f"{fit.median_error:.1%}", f"{fit.max_error:.1%}")
    return table


def profiles_table(loaded: list[Profile]) -> Table:
    """Every saved profile: the run it came from, where and what it fitted."""
    table = Table(title=f"{len(loaded)} profiles", header_style="bold", show_edge=False)
    for column in ("name", "run", "backend", "ranks", "nodes", "ops", "offering", "created"):
        # The run id and the date stay whole at 80 columns; names, ops and offerings fold instead.
        table.add_column(column, no_wrap=column in ("run", "created", "ranks", "nodes"), overflow="fold",
                         min_width=len(column))
    for p in loaded:
        table.add_row(p.name, p.run_id, p.backend, str(p.ranks), str(p.nodes),
                      ", ".join(sorted(p.fits) + (["training step"] if p.train is not None else [])
                                + (["training compute"] if p.train_compute is not None else [])),
                      p.offering or "", p.created_at[:10])
    return table


def train_compute_lines(profile: Profile, path: str) -> list[str]:
    """`calibrate` on a GPU training run: the ratio of measured to predicted compute, point by point."""
    from linkscope.model.calibration.train_compute import profile_scale

    scale = profile_scale(profile)
    assert scale is not None
    lines = [f"profile {profile.name} from training run {profile.run_id} on {scale.gpu} ({scale.precision}): "
             f"measured compute takes {scale.compute_time_ratio:.3g}x the datasheet model's "
             f"(median of {len(scale.points)} point(s))"]
    for p in scale.points:
        label = p["label"] or "run"
        lines.append(f"  {label}: measured {p['measured_compute_s']:.4g} s, predicted {p['predicted_compute_s']:.4g} s "
                     f"of compute per step (x{p['ratio']:.3g}; exposed communication from the {p['comm_from']})")
    lines.append(f"saved {path}; `predict train --system profile:{profile.name}` scales the model's compute by it"
                 + (f", and `advise` does for {profile.offering}" if profile.offering else
                    "; pass --offering to calibrate for `advise` to use it"))
    return lines
