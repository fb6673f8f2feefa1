"""`linkscope report RUN ... -o report.html`. Parsing and printing only; the page is built in report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from linkscope.cli.options import DbOpt
from linkscope.cli.common import console, user_errors
from linkscope.hardware.errors import UserError
from linkscope.results.store import ResultStore


@user_errors
def report(
    run_ids: list[str] = typer.Argument(..., help="Run ids (or unique prefixes): bench, p2p, import or check runs."),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="HTML file to write."),
    title: str = typer.Option("linkscope report", "--title"),
    db: Optional[str] = DbOpt,
) -> None:
    """One self-contained HTML page (works offline): busbw vs size measured and predicted, p2p heatmaps, verdicts."""
    from linkscope.report.html import render_report

    with ResultStore(db) as store:
        runs = [(store.get_run(r), store.rows(r), store.pair_rows(r)) for r in run_ids]
    page = render_report(runs, title)
    try:
        output.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"-o: cannot write '{output}': {exc.strerror}") from None
    console.print(f"wrote {output} ({len(page) // 1024} KiB, {len(runs)} run(s))", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `report` to the app."""
    app.command("report")(report)
