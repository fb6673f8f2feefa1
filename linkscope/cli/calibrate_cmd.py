"""`linkscope calibrate RUN_ID` and `linkscope profiles`: fit measured runs, list saved profiles."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from linkscope.cli.options import DbOpt
from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.calibration.calibrate_run import calibrate_run
from linkscope.model.calibration.profiles import usable_profiles
from linkscope.report.calibrate import fit_table, profiles_table
from linkscope.results.store import ResultStore, require_existing


MAX_NAME_CHARS = 128


def _check_name(value: str, what: str) -> None:
    """Run ids and profile names become SQL parameters and file names: short, printable, no path separators."""
    if not value or len(value) > MAX_NAME_CHARS:
        raise UserError(f"{what}: must be 1 to {MAX_NAME_CHARS} characters (got {len(value)})")
    if not value.isprintable() or "/" in value or "\\" in value or value in (".", ".."):
        raise UserError(f"{what}: '{value[:40]}' contains characters not allowed in a name")


@user_errors
def calibrate(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix) from `linkscope runs`."),
    name: Optional[str] = typer.Option(None, help="Profile name (default: run-ID); use as --system profile:NAME."),
    offering: Optional[str] = typer.Option(None, help="Catalog offering the run was measured on (advise then "
                                                      "uses the measured figures for it)."),
    db: Optional[str] = DbOpt,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Fit latency and bandwidth per op from a stored run, print the fit error, save a profile."""
    _check_name(run_id, "RUN_ID")
    if name is not None:
        _check_name(name, "--name")
    # Calibrating only reads runs: a mistyped --db must not create an empty database.
    with ResultStore(require_existing(db)) as store:
        report = calibrate_run(store, run_id, name, offering, load_db())
    profile = report.profile
    from linkscope.report.calibrate import rough_fit_warnings

    for warning in rough_fit_warnings(profile):
        print(warning, file=sys.stderr)  # on stderr, so --json stays one document
    if as_json:
        print_json({"profile": profile.name, "path": report.path, "run_id": profile.run_id,
                    "fits": {op: {"median_error": m, "max_error": x} for op, (m, x) in report.fit_errors().items()},
                    "train": profile.train, "train_compute": profile.train_compute, "kv": profile.kv})
        return
    if profile.kv is not None:
        kv = profile.kv
        console.print(f"profile {profile.name} from run {profile.run_id} ({profile.backend}): KV link latency "
                      f"{kv['latency_us']:.3g} us, {kv['per_message_us']:.3g} us per page, {kv['gb_per_s']:.3g} GB/s; "
                      f"median error {kv['median_error']:.1%}, max {kv['max_error']:.1%} over {kv['points']} "
                      f"points; saved to {report.path}; use as `bench kv --system profile:{profile.name}`",
                      highlight=False, soft_wrap=True, markup=False)
        return
    if profile.train_compute is not None:
        from linkscope.report.calibrate import train_compute_lines

        for line in train_compute_lines(profile, report.path):
            console.print(line, highlight=False, soft_wrap=True, markup=False)
        return
    if profile.train is not None:
        _print_train_fit(profile.name, profile.run_id, profile.train, report.path)
        return
    console.print(fit_table(profile.fits, f"profile {profile.name} from run {profile.run_id} ({profile.backend}, "
                                           f"{profile.ranks} ranks, {profile.nodes} node(s))"))
    console.print(f"saved {report.path}; use it as --system profile:{profile.name}")


def _print_train_fit(name: str, run_id: str, train: dict[str, Any], path: str) -> None:
    from linkscope.model.calibration.train_fit import TrainFit

    fit = TrainFit.from_dict(train)
    tflops = fit.effective_tflops
    terms = ", ".join(f"{k} {v:.3g}" for k, v in fit.coefficients.items() if v)
    console.print(f"profile {name} from training run {run_id}: step model fitted to {fit.points} point(s); "
                  f"effective {tflops:.4g} TFLOPS" if tflops else f"profile {name} from training run {run_id}",
                  highlight=False, soft_wrap=True)
    console.print(f"seconds per unit: {terms}; fit error median {fit.median_error:.1%}, max {fit.max_error:.1%}",
                  highlight=False, soft_wrap=True)
    console.print(f"saved {path}; use it as --system profile:{name} with `bench train` and `predict train`",
                  highlight=False, soft_wrap=True)


@user_errors
def profiles(as_json: bool = typer.Option(False, "--json")) -> None:
    """List saved calibration profiles."""
    loaded = usable_profiles()
    if as_json:
        print_json([{"name": p.name, "run_id": p.run_id, "backend": p.backend, "ranks": p.ranks, "nodes": p.nodes,
                     "ops": sorted(p.fits), "train": p.train is not None,
                     "train_compute": p.train_compute is not None, "offering": p.offering,
                     "created_at": p.created_at} for p in loaded])
        return
    console.print(profiles_table(loaded))


def register(app: typer.Typer) -> None:
    """Add `calibrate` and `profiles`."""
    app.command("calibrate")(calibrate)
    app.command("profiles")(profiles)
