"""`linkscope report RUN ... -o report.html`. Parsing and printing only; the page is built in report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from linkscope.cli.options import DbOpt
from linkscope.cli.common import console, user_errors
from linkscope.hardware.limits import MAX_LIST_ROWS
from linkscope.hardware.errors import UserError, check_output_path, write_output
from linkscope.results.store import ResultStore, require_existing


@user_errors
def report(
    run_ids: Optional[list[str]] = typer.Argument(None, help="Run ids (or unique prefixes): bench, p2p, import or "
                                                             "check runs; with --fleet, a fleet check (default: the "
                                                             "latest)."),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="HTML file to write."),
    title: str = typer.Option("linkscope report", "--title"),
    db: Optional[str] = DbOpt,
    fleet: bool = typer.Option(False, "--fleet", help="A fleet check as a nodes x items table, and each node's "
                                                      "history over the stored fleet checks (terminal)."),
    limit: int = typer.Option(10, "--limit", min=1, max=MAX_LIST_ROWS,
                              help="With --fleet: at most this many checks of history."),
) -> None:
    """One self-contained HTML page (works offline): busbw vs size measured and predicted, p2p heatmaps, verdicts."""
    from linkscope.report.html import render_report

    if fleet:
        _fleet(run_ids or [], db, limit)
        return
    if not run_ids:
        raise UserError("give one or more run ids (see `linkscope runs`), or --fleet")

    check_output_path(output, "-o")
    with ResultStore(require_existing(db)) as store:  # reading never creates or migrates a database
        runs = [(store.get_run(r), store.rows(r), store.pair_rows(r)) for r in run_ids]
    page = render_report(runs, title)
    write_output(output, page, "-o")
    console.print(f"wrote {output} ({len(page) // 1024} KiB, {len(runs)} run(s))", highlight=False)


def _fleet(run_ids: list[str], db: Optional[str], limit: int) -> None:
    from linkscope.report.fleet import history_table, nodes_table

    if len(run_ids) > 1:
        raise UserError("--fleet reports one fleet check at a time")
    with ResultStore(require_existing(db) if db else None) as store:
        summaries = store.list_runs(kind="check", label="fleet", limit=limit)
        if not summaries and not run_ids:
            raise UserError("no fleet check stored yet (run `linkscope check --fleet` under torchrun first)")
        info = store.get_run(run_ids[0] if run_ids else summaries[0].run_id)
        if not info.extra.get("fleet"):
            raise UserError(f"run {info.run_id} is not a fleet check (`linkscope runs --kind check --label fleet`)")
        history = [store.get_run(s.run_id) for s in summaries]
    console.print(nodes_table(info))
    console.print(history_table(history, console.width))


def register(app: typer.Typer) -> None:
    """Add `report` to the app."""
    app.command("report")(report)
