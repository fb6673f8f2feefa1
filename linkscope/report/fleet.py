"""`report --fleet`: a fleet check as a nodes x items table, and each node's pair figure over its stored checks."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from linkscope.results.records import RunInfo

_COLOURS = {"PASS": "green", "WARN": "yellow", "FAIL": "red", "SKIP": "dim"}


def nodes_table(info: RunInfo) -> Table:
    """One row per node, one column per item; each cell the status and the measured figure."""
    nodes = (info.extra.get("fleet") or {}).get("nodes", [])
    names = list(dict.fromkeys(item["name"] for node in nodes for item in node.get("items", [])))
    table = Table(title=f"fleet check {info.run_id} ({info.started_at}): nodes x items", show_edge=False)
    table.add_column("node", overflow="fold")
    table.add_column("verdict", no_wrap=True)
    for name in names:
        # Item names and figures wrap at word boundaries on a narrow terminal; never cut to an ellipsis.
        table.add_column(escape(name), overflow="fold")
    for node in nodes:
        by_name = {item["name"]: item for item in node.get("items", [])}
        cells = [_cell(by_name.get(name)) for name in names]
        verdict = node.get("verdict", "?")
        table.add_row(escape(str(node.get("hostname"))), f"[{_COLOURS.get(verdict, 'white')}]{verdict}[/]", *cells)
    return table


def _cell(item: dict[str, Any] | None) -> str:
    if item is None:
        return "-"
    measured = "" if item.get("measured") is None else f" {item['measured']}"
    return f"[{_COLOURS.get(item['status'], 'white')}]{item['status']}[/]{escape(measured)}"


HISTORY_COLUMN_CELLS = 19
"""One check's column: its start to the minute (16) and the separator between columns."""


def history_table(runs: list[RunInfo], width: int = 10_000) -> Table:
    """Each node's pair bandwidth (GB/s) in each stored fleet check, oldest first; where `width` cannot hold
    every check's column whole (its time and run id), the oldest are left out and the title says how many."""
    runs = sorted(runs, key=lambda r: r.started_at)
    hosts = list(dict.fromkeys(n["hostname"] for run in runs for n in (run.extra.get("fleet") or {}).get("nodes", [])))
    room = max(1, (width - max((len(h) for h in hosts), default=4) - 2) // HISTORY_COLUMN_CELLS)
    left_out = max(0, len(runs) - room)
    runs = runs[left_out:]
    title = "node-pair bandwidth per fleet check (GB/s)" + (f"; {left_out} older left out (wider terminal or "
                                                            "--limit)" if left_out else "")
    table = Table(title=title, show_edge=False)
    table.add_column("node", overflow="fold")
    for run in runs:
        table.add_column(f"{run.started_at[:16]}\n{run.run_id}", justify="right", no_wrap=True)
    for host in hosts:
        row = []
        for run in runs:
            node = next((n for n in run.extra["fleet"].get("nodes", []) if n["hostname"] == host), None)
            figure = None if node is None else node.get("pair_gb_per_s")
            row.append("-" if figure is None else f"{figure:.3g}")
        table.add_row(escape(host), *row)
    return table
