"""The `linkscope runs` list: every column when wide, the ones that identify a run when narrow."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from linkscope.hardware.errors import UserError
from linkscope.results.records import CollectiveRow, PairRow, RunInfo, bi_below_one_way
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
                 "hosts": escape(hosts), "ops": " ".join(s.ops),
                 # Training, MoE and KV runs store steps and exchanges, not collective rows: a 0 there would read as
                 # "nothing measured".
                 "rows": "-" if s.kind in ("train", "moe", "kv") and not s.n_rows else str(s.n_rows)}
        table.add_row(s.run_id, s.started_at[:16].replace("T", " "), *(cells[n] for n in names))
    return table


def metadata_table(info: RunInfo) -> Table:
    """One run's metadata as `key value` lines: what ran, where, with which versions, and how it ended."""
    table = Table(show_header=False, show_edge=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    fields = [("run", info.run_id), ("kind", info.kind), ("label", info.label), ("status", info.status),
              ("started", info.started_at), ("ended", info.ended_at or "-"), ("hosts", ", ".join(info.hosts)),
              ("ranks", str(info.world_size)), ("nodes", str(info.nodes)), ("backend", info.backend),
              ("versions", ", ".join(f"{k} {v}" for k, v in info.versions.items())), ("command", info.command)]
    if info.error:
        fields.append(("error", info.error))
    for name, value in fields:
        table.add_row(name, value or "-")
    return table


def pairs_table(pairs: list[PairRow]) -> Table:
    """The p2p rows of a run: bandwidth each way and both ways, and latency, per pair."""
    table = Table(title="pairs", show_edge=False)
    for name in ("src", "dst", "size (B)", "uni (GB/s)", "bi (GB/s)", "latency (us)"):
        table.add_column(name, justify="right")
    flagged = bi_below_one_way(pairs)
    for p in pairs:
        bi = _num(p.bi_gb_per_s) + (BI_FLAG if (p.src, p.dst) in flagged else "")
        table.add_row(str(p.src), str(p.dst), str(p.size_bytes), _num(p.uni_gb_per_s), bi, _num(p.latency_us))
    if flagged:
        table.caption = BI_FLAG_NOTE
    return table


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


BI_FLAG = "!"
BI_FLAG_NOTE = ("! bidirectional below one direction alone: the two directions contended (on CPU ranks, for the "
                "host's cores), so the figure is not the link's")


def matrix_table(values: list[list[float | None]], digits: int,
                 flagged: set[tuple[int, int]] | None = None) -> Table:
    """A rank x rank matrix (p2p bandwidth or latency); `-` on the diagonal and where nothing was measured; the
    `flagged` cells (src, dst) carry BI_FLAG."""
    table = Table(show_edge=False)
    table.add_column("src \\ dst", justify="right")
    for dst in range(len(values)):
        table.add_column(str(dst), justify="right", no_wrap=True)
    marks = flagged or set()
    for src, row in enumerate(values):
        table.add_row(str(src), *("-" if v is None else f"{v:.{digits}f}" + (BI_FLAG if (src, dst) in marks else "")
                                  for dst, v in enumerate(row)))
    return table


def model_choices(info: RunInfo, rows: list[CollectiveRow]) -> dict[tuple[str, int], tuple[str, str]]:
    """The model's algorithm and protocol for each op and size that NCCL reported a choice for, on the run's probed
    System; empty when the run has no System or no choices (the model cannot say, or nothing to compare)."""
    measured = {(r.op, r.size_bytes) for r in rows if r.nccl_algo is not None and r.size_bytes > 0}
    if not measured or not info.system:
        return {}
    from linkscope.hardware.loader import load_db
    from linkscope.hardware.serialize import system_from_dict
    from linkscope.model.comm.predict import predict_sizes

    out: dict[tuple[str, int], tuple[str, str]] = {}
    try:
        system = system_from_dict(info.system, load_db().gpu)
        for op in sorted({op for op, _ in measured}):
            sizes = sorted(size for o, size in measured if o == op)
            for p in predict_sizes(system, op, sizes, gpus=min(info.world_size or system.gpus, system.gpus)):
                out[(op, p.bytes)] = (p.algorithm.upper(), p.protocol.upper())
    except (UserError, KeyError, TypeError, ValueError):
        return {}
    return out
