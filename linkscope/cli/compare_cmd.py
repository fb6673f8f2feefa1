"""`linkscope compare RUN RUN ...`: stored runs side by side. Parsing and printing only; logic in report.compare."""

from __future__ import annotations

from typing import Optional

import typer

from linkscope.cli.options import DbOpt
from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.errors import UserError
from linkscope.report.compare import busbw_table, choice_lines, compare_runs, environment_table
from linkscope.results.store import ResultStore, require_existing


@user_errors
def compare(
    run_ids: list[str] = typer.Argument(..., help="Two or more run ids (or unique prefixes); the first is the base."),
    op: Optional[str] = typer.Option(None, "--op", help="Collective to compare (default: the most measured one)."),
    as_json: bool = typer.Option(False, "--json"),
    db: Optional[str] = DbOpt,
) -> None:
    """busbw at 8 B/1M/64M/1G, small-message latency and peak busbw, % against the first run, and what differs."""
    if len(run_ids) < 2:
        raise UserError("compare needs at least two runs")
    with ResultStore(require_existing(db)) as store:  # reading never creates or migrates a database
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


def register(app: typer.Typer) -> None:
    """Add `compare` to the app."""
    app.command("compare")(compare)
