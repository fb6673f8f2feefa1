"""`linkscope compare RUN RUN ...`: stored runs side by side. Parsing and printing only; logic in report.compare."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.errors import UserError
from linkscope.report.compare import DEFAULT_SIZES, compare_runs
from linkscope.results.store import ResultStore


def _size_label(nbytes: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def _cell(value: float | None, pct: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if pct is None or pct == 0 else f"{value:g} ({pct:+.1f}%)"


@user_errors
def compare(
    run_ids: list[str] = typer.Argument(..., help="Two or more run ids (or unique prefixes); the first is the base."),
    op: Optional[str] = typer.Option(None, "--op", help="Collective to compare (default: the most measured one)."),
    as_json: bool = typer.Option(False, "--json"),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database file."),
) -> None:
    """busbw at 8 B/1M/64M/1G, small-message latency and peak busbw, % against the first run, and what differs."""
    if len(run_ids) < 2:
        raise UserError("compare needs at least two runs")
    with ResultStore(db) as store:
        runs = [(store.get_run(r), store.rows(r)) for r in run_ids]
    data = compare_runs(runs, op)
    if as_json:
        print_json(data)
        return
    table = Table(title=f"{data['op']}: busbw (GB/s), % vs {runs[0][0].run_id}", show_edge=False)
    table.add_column("run")
    table.add_column("label")
    for size in DEFAULT_SIZES:
        table.add_column(f"busbw@{_size_label(size)}", justify="right")
    table.add_column("latency us", justify="right")
    table.add_column("peak busbw", justify="right")
    for e in data["runs"]:
        table.add_row(e["run_id"], escape(e["label"] or ""), *[_cell(e["busbw"][str(s)], e["busbw_pct"][str(s)])
                                                   for s in DEFAULT_SIZES],
                      _cell(e["latency_us"], e["latency_pct"]), _cell(e["peak_busbw"], e["peak_busbw_pct"]))
    console.print(table)
    if data["environment_diff"]:
        diff = Table(title="environment: what differs", show_edge=False)
        diff.add_column("key")
        for e in data["runs"]:
            diff.add_column(e["run_id"])
        for key, values in data["environment_diff"].items():
            diff.add_row(key, *[escape("unknown" if v is None else str(v)) for v in values])
        console.print(diff)
    else:
        console.print("environment: identical (GPU, driver, NCCL, torch, NCCL_* variables, topology, hosts)")


def register(app: typer.Typer) -> None:
    """Add `compare` to the app."""
    app.command("compare")(compare)
