"""`linkscope check`: an acceptance test of this machine. Parsing and printing only; logic in linkscope.check."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from linkscope.cli.options import DbOpt
from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.errors import UserError, check_output_path

_COLOURS = {"PASS": "green", "WARN": "yellow", "FAIL": "red", "SKIP": "dim"}


@user_errors
def check(
    expect: Optional[str] = typer.Option(None, "--expect", help="Offering, preset or System file to check against "
                                                                "(default: the probed System)."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes, few iterations (the default)."),
    full: bool = typer.Option(False, "--full", help="Sizes up to 256 MiB, nccl-tests' iteration counts."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document instead of lines."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write JUnit XML to this file."),
    prometheus: Optional[Path] = typer.Option(None, "--prometheus", help="Also write a node_exporter textfile "
                                              "(NCCL Inspector's metric names, linkscope_check_status)."),
    pass_pct: float = typer.Option(90.0, "--pass-pct", help="PASS at this % of the expectation or more."),
    warn_pct: float = typer.Option(75.0, "--warn-pct", help="WARN at this % or more, else FAIL."),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="Ranks (default: the visible GPUs, 2 on CPU)."),
    db: Optional[str] = DbOpt,
) -> None:
    """Did I get what I paid for? PASS/WARN/FAIL/SKIP per item; exit 1 when something fails."""
    from linkscope.check.items import Thresholds
    from linkscope.check.junit import junit_xml
    from linkscope.check.run import CheckOptions, run_check

    if quick and full:
        raise UserError("give --quick or --full, not both")
    if nproc is not None and nproc < 1:
        raise UserError(f"--nproc must be at least 1, got {nproc}")
    thresholds = Thresholds(pass_pct, warn_pct).validated()
    for path, flag in ((junit, "--junit"), (prometheus, "--prometheus")):
        check_output_path(path, flag)
    if expect is not None:
        from linkscope.hardware.loader import load_db
        from linkscope.hardware.resolve import resolve_system

        resolve_system(expect, load_db())  # unknown --expect: exit 2 before anything is measured
    result = run_check(CheckOptions(expect=expect, mode="full" if full else "quick", thresholds=thresholds,
                                    db_path=str(db) if db else None, nproc=nproc))
    if junit is not None:
        junit.write_text(junit_xml(result.items), encoding="utf-8")
    if prometheus is not None:
        _write_prometheus(prometheus, result.run_id, db)
    if as_json:
        print_json(result.to_dict())
    else:
        console.print(f"check of this machine against {escape(result.expected_system)} (run {result.run_id})",
                      highlight=False)
        for item in result.items:
            measured = "-" if item.measured is None else item.measured
            expected = "-" if item.expected is None else item.expected
            line = (f"[{_COLOURS[item.status]}]{item.status:4}[/] {escape(item.name):28} "
                    f"measured {escape(str(measured))} / expected {escape(str(expected))} {escape(item.unit)}  "
                    f"\\[{escape(item.source)}]")
            console.print(line, highlight=False, soft_wrap=True)
            if item.fix:
                console.print(f"      {'why' if item.status == 'SKIP' else 'fix'}: {escape(item.fix)}",
                              highlight=False, soft_wrap=True)
        console.print(f"verdict: {result.verdict}", highlight=False)
    if result.verdict == "FAIL":
        raise typer.Exit(1)


def _write_prometheus(path: Path, run_id: str, db: Optional[str]) -> None:
    from linkscope.results.prometheus import stored_run_samples, write_textfile
    from linkscope.results.store import ResultStore

    with ResultStore(db) as store:
        info = store.get_run(run_id)
        write_textfile(path, stored_run_samples(info, store.rows(run_id)))


def register(app: typer.Typer) -> None:
    """Add `check` to the app."""
    app.command("check")(check)
