"""`linkscope demo`: the main job, run as the commands a new user would type, each shown before it runs.

Probe this machine, show the presets and the NVLink + InfiniBand offerings, measure every collective on
local ranks into the SQLite store, calibrate a profile from that run and predict with it, then predict a
training step for a preset and ask what to rent.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from linkscope.cli.options import DbOpt
from linkscope.cli.common import console, fail
from linkscope.hardware.errors import UserError

if TYPE_CHECKING:  # annotations only: this typer vendors click as typer._click; older typers depend on click
    from typer import _click as click


def _run(command: click.Command, args: list[str]) -> int:
    """Run one linkscope command in-process through the root command, echoing it; return its exit code."""
    # The whole command on its own line, never cut to the terminal's width, so it can be copied.
    console.print()
    console.print(f"$ linkscope {' '.join(args)}", style="bold", soft_wrap=True, markup=False, highlight=False)
    try:
        command.main(args, prog_name="linkscope", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    return 0


def _latest_run(label: str, db: str | None, kind: str | None = None) -> str:
    from linkscope.results.store import ResultStore

    with ResultStore(db) as store:
        runs = store.list_runs(limit=1, label=label, kind=kind)
    if not runs:
        raise UserError(f"the demo's run '{label}' was not stored")
    return runs[0].run_id


TRAIN_MODEL = ["--model", "llama2-7b", "--layers", "2", "--hidden", "128", "--heads", "4", "--vocab", "512",
               "--seq-len", "64", "-n", "5", "-w", "2"]
"""A Llama-2 shape scaled down until a step takes milliseconds on CPU ranks."""


def _train_demo(root: click.Command, nproc: int, db_args: list[str], db: str | None) -> None:
    """Measure a small training loop at 1 and `nproc` ranks, calibrate this machine from it, and predict a
    deeper model measured next beside its prediction."""
    label = f"demo-train-{time.strftime('%Y%m%d-%H%M%S')}"
    counts = "1," + str(nproc) if nproc > 1 else "1,2"
    code = _run(root, ["bench", "train", *TRAIN_MODEL, "--scaling", counts, "--profile-steps", "2", "--quiet",
                      "--label", label, *db_args])
    if code != 0:
        fail(f"the training measurement ended with exit code {code}", code)
    run_id = _latest_run(label, db, kind="train")
    profile = f"local-train-{run_id}"
    deeper = list(TRAIN_MODEL)
    deeper[deeper.index("--layers") + 1] = "3"  # a model the calibration has not seen
    for args in (["calibrate", run_id, "--name", profile, *db_args],
                 ["bench", "train", *deeper, "--nproc", str(nproc), "--profile-steps", "0", "--quiet",
                  "--system", f"profile:{profile}", *db_args]):
        if _run(root, args) != 0:
            fail(f"`linkscope {' '.join(args)}` failed")


def _check_options(nproc: int, max_bytes: str, db: str | None) -> None:
    """Every option checked before the first step runs: a bad one must not cost three steps and then fail."""
    from linkscope.bench.sizes import parse_size
    from linkscope.results.store import DbLocation

    try:
        if not 1 <= nproc <= MAX_DEMO_RANKS:
            raise UserError(f"--nproc must be from 1 to {MAX_DEMO_RANKS} local ranks, got {nproc}")
        parse_size(max_bytes, "--max-bytes")
        DbLocation.parse(db)
    except UserError as exc:
        fail(str(exc))


MAX_DEMO_RANKS = 64
"""The demo runs on one machine's local ranks; the sweep's own limits (cores, oversubscription) apply beneath."""


def demo(
    ctx: typer.Context,
    db: Optional[str] = DbOpt,
    nproc: int = typer.Option(2, help="Local ranks for the sweep."),
    max_bytes: str = typer.Option("4M", help="Largest message of the quick sweep."),
) -> None:
    """Probe, measure every collective on local ranks, calibrate, predict, advise, check; write report.html."""
    # The root command this one was called through: the demo runs its siblings without importing the command
    # line that registers it.
    root = ctx.find_root().command
    _check_options(nproc, max_bytes, db)
    label = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    db_args = ["--db", str(db)] if db else []
    for args in (["topo"], ["systems"], ["catalog", "--nvlink", "--ib"]):
        _run(root, args)
    code = _run(root, ["bench", "all", "-b", "8", "-e", max_bytes, "-f", "4", "-n", "10", "-w", "2", "--nproc",
                      str(nproc), "--label", label, *db_args])
    if code != 0:
        fail(f"the sweep ended with exit code {code}", code)
    run_id = _latest_run(label, db)
    profile = f"local-{run_id}"
    steps = [
        ["runs", *db_args, "--limit", "3"],
        ["calibrate", run_id, "--name", profile, *db_args],
        ["predict", "collective", "--system", f"profile:{profile}", "--op", "all_reduce", "--bytes", max_bytes,
         "--sweep"],
        ["predict", "train", "--system", "dgx-h100", "--gpus", "64", "--model", "llama2-70b", "--global-batch",
         "512"],
        ["advise", "train", "--model", "llama2-70b", "--tokens", "2B", "--gpus", "64", "--top", "5"],
    ]
    for args in steps:
        if _run(root, args) != 0:
            fail(f"`linkscope {' '.join(args)}` failed")
    _train_demo(root, nproc, db_args, db)
    # A FAIL is the check's verdict on this machine, not a broken demo: report it and carry on.
    check_code = _run(root, ["check", "--quick", "--nproc", str(nproc), *db_args])
    if check_code not in (0, 1):
        fail(f"`linkscope check --quick` ended with exit code {check_code}", check_code)
    check_id = _latest_run("check", db, kind="check")
    report_path = Path("report.html").resolve()
    if _run(root, ["report", run_id, check_id, "-o", str(report_path), *db_args]) != 0:
        fail("`linkscope report` failed")
    console.print(f"\nThe report is {report_path} (open it in a browser; it needs no network).")
    console.print(f"The sweep is run {run_id} (`linkscope runs show {run_id}`); profile:{profile} predicts "
                  "collectives on this machine from it.")


def register(app: typer.Typer) -> None:
    """Add `demo`."""
    app.command("demo")(demo)
