"""`linkscope report`: one self-contained HTML file (plotly inlined, no network) with busbw vs size per op for every
run beside the model's prediction, the pairwise heatmap of p2p runs, and the verdicts of check runs.

Every label, hostname and note is escaped with html.escape before it reaches the page or a plot.
"""

from __future__ import annotations

import html
from typing import Any

from linkscope.hardware.errors import UserError
from linkscope.results.records import NOT_A_SWEEP, CollectiveRow, PairRow, RunInfo

_STATUS_COLOURS = {"PASS": "#1a7f37", "WARN": "#9a6700", "FAIL": "#cf222e", "SKIP": "#6e7781"}


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _run_name(info: RunInfo) -> str:
    return _e(f"{info.run_id} {info.label}".strip())


def _predicted(info: RunInfo, op: str, sizes: list[int]) -> list[float] | None:
    """The model's busbw for this run's System at its rank count; None where the model cannot say (CPU host...)."""
    if not info.system:
        return None
    try:
        from linkscope.hardware.loader import load_db
        from linkscope.hardware.serialize import system_from_dict
        from linkscope.model.comm.predict import predict_sizes

        system = system_from_dict(info.system, load_db().gpu)
        gpus = min(info.world_size or system.gpus, system.gpus)
        return [p.busbw for p in predict_sizes(system, op, [s for s in sizes if s > 0], gpus=gpus)]
    except Exception:  # a run whose System the model cannot predict is plotted measured only
        return None


def _drawable(op: str, runs: list[tuple[RunInfo, list[CollectiveRow]]]) -> str:
    """Why `op` gets no busbw chart (empty when it gets one): a chart of an unknown collective's bus bandwidth, or
    of nothing but zeros, would show a measurement that is not there."""
    named = ", ".join(info.run_id for info, rows in runs if any(r.op == op for r in rows))
    if op == "unknown":
        return (f"Run(s) {named}: the output names no collective (its header was cut away), so its bus bandwidth "
                "cannot be defined; its rows are not drawn. Import the output with its header, or see `linkscope "
                "runs show`.")
    if not any(r.busbw > 0 for _, rows in runs for r in rows if r.op == op and r.size_bytes > 0):
        return f"{op}: every measured bus bandwidth is 0 (run(s) {named}); nothing to draw."
    return ""


def _busbw_figure(op: str, runs: list[tuple[RunInfo, list[CollectiveRow]]]) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for info, rows in runs:
        pts = sorted((r.size_bytes, r.busbw) for r in rows if r.op == op and r.placement == "out_of_place"
                     and r.size_bytes > 0)
        if not pts:
            continue
        sizes = [s for s, _ in pts]
        fig.add_trace(go.Scatter(x=sizes, y=[b for _, b in pts], mode="lines+markers",
                                 name=f"{_run_name(info)} measured"))
        pred = _predicted(info, op, sizes)
        if pred is not None:
            fig.add_trace(go.Scatter(x=sizes, y=pred, mode="lines", line={"dash": "dash"},
                                     name=f"{_run_name(info)} predicted"))
    fig.update_layout(title=_e(f"{op}: busbw vs size"), xaxis={"type": "log", "title": "size (bytes)"},
                      yaxis={"title": "busbw (GB/s)"}, height=420)
    return fig


def _heatmap(info: RunInfo, pairs: list[PairRow]) -> Any:
    import plotly.graph_objects as go

    world = max(max(p.src, p.dst) for p in pairs) + 1
    z: list[list[float | None]] = [[None] * world for _ in range(world)]
    for p in pairs:
        z[p.src][p.dst] = p.uni_gb_per_s
    labels = [f"rank {i}" for i in range(world)]
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=labels, colorscale="Viridis", colorbar={"title": "GB/s"}))
    fig.update_layout(title=f"{_run_name(info)}: unidirectional p2p bandwidth (GB/s), src row -> dst column",
                      height=420, yaxis={"autorange": "reversed"})
    return fig


def _check_table(info: RunInfo) -> str:
    check = info.extra.get("check", {})
    rows = []
    for item in check.get("items", []):
        colour = _STATUS_COLOURS.get(item.get("status"), "#000")
        rows.append(f"<tr><td style='color:{colour};font-weight:bold'>{_e(item.get('status'))}</td>"
                    f"<td>{_e(item.get('name'))}</td><td>{_e(item.get('measured'))}</td>"
                    f"<td>{_e(item.get('expected'))}</td><td>{_e(item.get('unit'))}</td>"
                    f"<td>{_e(item.get('source'))}</td><td>{_e(item.get('fix'))}</td></tr>")
    return (f"<h2>Check {_run_name(info)}: {_e(check.get('verdict'))} against {_e(check.get('expected_system'))}</h2>"
            "<table><tr><th>status</th><th>item</th><th>measured</th><th>expected</th><th>unit</th><th>source</th>"
            f"<th>cause and fix</th></tr>{''.join(rows)}</table>")


def _run_summary(info: RunInfo) -> str:
    return (f"<tr><td>{_e(info.run_id)}</td><td>{_e(info.label)}</td><td>{_e(info.kind)}</td>"
            f"<td>{_e(info.started_at)}</td><td>{_e(', '.join(info.hosts))}</td><td>{_e(info.world_size)}</td>"
            f"<td>{_e(info.backend)}</td><td>{_e(info.versions.get('nccl'))}</td></tr>")


def render_report(runs: list[tuple[RunInfo, list[CollectiveRow], list[PairRow]]],
                  title: str = "linkscope report") -> str:
    """The whole page as one string; the first plot carries plotly.js inline, the others reuse it."""
    for info, rows, pairs in runs:
        # A page with nothing of a run on it would look like a rendering fault: say why instead.
        if info.kind in ("train", "moe", "kv"):
            what = NOT_A_SWEEP[info.kind]
            raise UserError(f"run {info.run_id} is {what}; the report draws collective sweeps and p2p "
                            f"matrices (see `linkscope runs show {info.run_id}`)")
        if not rows and not pairs and info.kind != "check" and "check" not in info.extra:
            raise UserError(f"run {info.run_id} has no measurements to draw (status {info.status})")
    parts: list[str] = []
    figures: list[Any] = []
    notes: list[str] = []
    ops = sorted({r.op for _, rows, _ in runs for r in rows})
    for op in ops:
        drawable = _drawable(op, [(info, rows) for info, rows, _ in runs])
        if drawable:
            notes.append(f"<p>{_e(drawable)}</p>")
            continue
        figures.append(_busbw_figure(op, [(info, rows) for info, rows, _ in runs]))
    for info, _, pairs in runs:
        if pairs:
            figures.append(_heatmap(info, pairs))
    for i, fig in enumerate(figures):
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False}))
    checks = [_check_table(info) for info, _, _ in runs if info.kind == "check" or "check" in info.extra]
    summary = "".join(_run_summary(info) for info, _, _ in runs)
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:13px}")
    return ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
            f"<title>{_e(title)}</title><style>{style}</style></head><body>"
            f"<h1>{_e(title)}</h1><table><tr><th>run</th><th>label</th><th>kind</th><th>started (UTC)</th>"
            f"<th>hosts</th><th>ranks</th><th>backend</th><th>NCCL</th></tr>{summary}</table>"
            + "".join(checks) + "".join(notes) + "".join(parts) + "</body></html>\n")
