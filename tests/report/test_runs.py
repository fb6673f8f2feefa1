"""The runs list: identifying columns survive 80 columns whole; labels with markup print as text."""

from __future__ import annotations

import io

from rich.console import Console

from linkscope.report.runs import WIDE_COLUMNS, runs_table
from linkscope.results.store import RunSummary

RUNS = [RunSummary("3edbef81", "import", "pre2.13_all_reduce_a10g_2nodes", "2026-12-03T09:20:00+00:00", None,
                   "complete", hosts=["a", "b"], world_size=2, n_rows=50, ops=["all_reduce"]),
        RunSummary("3aeac1b7", "check", "[red]x[/red]", "2026-12-03T09:15:00+00:00", None, "complete",
                   hosts=["vm"], world_size=2, n_rows=38, ops=["all_gather", "all_reduce", "p2p"])]


def _render(width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(runs_table(RUNS, width=width))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_narrow_output_keeps_kind_and_status_whole_and_drops_the_rest() -> None:
    text = _render(80)
    assert "import" in text and "complete" in text and "…" not in text
    assert "ops" not in text.splitlines()[0] and all(len(line) <= 80 for line in text.splitlines())


def test_wide_output_has_every_column_and_escapes_labels() -> None:
    text = _render(WIDE_COLUMNS + 10)
    header = text.splitlines()[0]
    assert all(name in header for name in ("ranks", "hosts", "rows", "ops"))
    assert "[red]x[/red]" in text and "all_gather" in text and "p2p" in text
