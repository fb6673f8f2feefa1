"""The `linkscope runs` list: every column when wide, the ones that identify a run when narrow."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from linkscope.results.store import RunSummary

WIDE_COLUMNS = 110
"""Below this many terminal columns ranks, hosts and ops are left out (`runs show ID` has them)."""


def runs_table(summaries: list[RunSummary], width: int = WIDE_COLUMNS) -> Table:
    """One row per run, newest first; cells fold rather than shrink to an ellipsis."""
    wide = width >= WIDE_COLUMNS
    names = ["kind", "label", "status", "ranks", "hosts", "rows", "ops"] if wide else ["kind", "label", "status",
                                                                                        "rows"]
    table = Table(show_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("started (UTC)", no_wrap=True)
    for name in names:
        table.add_column(name, justify="right" if name in ("ranks", "rows") else "left",
                         no_wrap=name in ("kind", "status"), overflow="fold")
    for s in summaries:
        hosts = s.hosts[0] if len(s.hosts) == 1 else str(len(s.hosts))
        cells = {"kind": s.kind, "label": escape(s.label or ""), "status": s.status, "ranks": str(s.world_size),
                 "hosts": escape(hosts), "rows": str(s.n_rows), "ops": " ".join(s.ops)}
        table.add_row(s.run_id, s.started_at[:16].replace("T", " "), *(cells[n] for n in names))
    return table
