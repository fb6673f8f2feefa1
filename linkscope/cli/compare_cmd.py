"""`linkscope compare RUN RUN ...`: stored runs side by side. Parsing and printing only; logic in report.compare."""

from __future__ import annotations

from typing import Any, Optional

import typer

from linkscope.cli.options import DbOpt
from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.errors import UserError
from linkscope.report.compare import busbw_table, choice_lines, compare_runs, environment_table
from linkscope.report.compare_knobs import compare_knobs, knob_lines, knob_table
from linkscope.results.store import ResultStore, require_existing


@user_errors
def compare(
    run_ids: list[str] = typer.Argument(..., help="Two or more run ids (or unique prefixes); the first is the base. "
                                        "bench train runs: one --sweep run or several runs of one job."),
    op: Optional[str] = typer.Option(None, "--op", help="Collective to compare (default: the most measured one)."),
    as_json: bool = typer.Option(False, "--json"),
    db: Optional[str] = DbOpt,
) -> None:
    """busbw at 8 B/1M/64M/1G, small-message latency and peak busbw, % against the first run, and what differs.

    On bench train runs (a --sweep grad-compression=... or bucket-mb=... run, or runs with --comm-hook): each knob's
    measured step time beside its stored prediction, and its measured speedup over the no-compression point
    against the predicted one (their ratio)."""
    with ResultStore(require_existing(db)) as store:  # reading never creates or migrates a database
        if run_ids and store.get_run(run_ids[0]).kind == "train":
            _knobs(compare_knobs([store.get_run(r) for r in run_ids]), as_json)
            return
        if len(run_ids) < 2:
            raise UserError("compare needs at least two runs")
        runs = [(store.get_run(r), store.rows(r)) for r in run_ids]
    data = compare_runs(runs, op)
    if as_json:
        print_json(data)
        return
    console.print(busbw_table(data))
    environment = environment_table(data)
    console.print(environment if environment is not None else
                  "environment: identical (GPU, driver, NCCL, torch, NCCL_* variables, topology, hosts)")
    for line in choice_lines(data):
        console.print(line, highlight=False, markup=False)


def _knobs(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    console.print(knob_table(data))
    for line in knob_lines(data):
        console.print(line, highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add `compare` to the app."""
    app.command("compare")(compare)
