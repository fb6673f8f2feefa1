"""`linkscope compare` on `bench train` runs: each measured knob (communication hook, bucket size) beside the
prediction stored with it, and its measured speedup over the no-compression point against the predicted one.

The ratio of ratios (measured speedup / predicted speedup) is the issue's accuracy measure for a knob: it cancels
what the model gets wrong about the step as a whole (compute, the baseline's communication) and keeps what it gets
wrong about the knob.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from rich.markup import escape
from rich.table import Table

from linkscope.hardware.errors import UserError
from linkscope.results.records import RunInfo

SAME_JOB_KEYS = ("model", "ranks", "backend")
"""What must agree between points for a speedup to mean the knob's (the layout and precision are checked too)."""
SAME_LAYOUT_KEYS = ("layout", "tp", "zero", "micro_batch", "precision")


def knob_label(par: dict[str, Any]) -> str:
    """`powersgd:4, 25 MB`: the hook as `--comm-hook` spells it, and the bucket."""
    hook = str(par.get("grad_compression") or "none")
    if hook == "powersgd" and par.get("powersgd_rank"):
        hook = f"powersgd:{par['powersgd_rank']}"
    return f"{hook}, {float(par.get('bucket_mb') or 0):g} MB" + ("" if par.get("overlap", True) else
                                                               ", no-overlap")


def _points(info: RunInfo) -> list[dict[str, Any]]:
    """The documents `bench train` stored with the run (one per point)."""
    if info.kind != "train":
        raise UserError(f"run {info.run_id} is not a training run (kind {info.kind}); compare takes either "
                        "collective runs or bench train runs, not both")
    points = (info.extra.get("train_summary") or {}).get("points") or []
    # Named by the run they are stored in (a copied or imported run keeps its documents' old id).
    measured = [{**p, "run_id": info.run_id} for p in points if p.get("step_time_s")]
    if not measured:
        raise UserError(f"run {info.run_id} has no measured training steps (status {info.status}); nothing to "
                        "compare")
    return measured


def _check_same_job(points: list[dict[str, Any]]) -> None:
    """A speedup is the knob's only when the model, ranks, backend and layout are the same."""
    first = points[0]
    for p in points[1:]:
        for key in SAME_JOB_KEYS:
            if p.get(key) != first.get(key):
                raise UserError(f"run {p['run_id']} {p['label'] or ''} has {key} {p.get(key)}, run "
                                f"{first['run_id']} has {first.get(key)}: a knob's speedup compares the same job")
        for key in SAME_LAYOUT_KEYS:
            a, b = p["parallelism"].get(key), first["parallelism"].get(key)
            if a != b:
                raise UserError(f"run {p['run_id']} {p['label'] or ''} has {key} {a}, run {first['run_id']} has "
                                f"{b}: a knob's speedup compares the same layout")


def _baseline(points: list[dict[str, Any]]) -> tuple[int, str]:
    """The first point without compression (the issue's baseline), else the first point, and why."""
    for i, p in enumerate(points):
        if p["parallelism"].get("grad_compression", "none") == "none":
            return i, "the first point without gradient compression"
    return 0, "the first point (no point runs without gradient compression)"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def compare_knobs(infos: list[RunInfo]) -> dict[str, Any]:
    """Per point of every run: knob, measured and predicted step time, measured/predicted, measured and predicted
    speedup over the baseline point, their ratio, and whether the model got the sign (helps / hurts) right."""
    points = [p for info in infos for p in _points(info)]
    if len(points) < 2:
        raise UserError(f"run {infos[0].run_id} measured one configuration; give a --sweep run or two or more runs")
    _check_same_job(points)
    base_index, why = _baseline(points)
    base = points[base_index]
    base_measured = base["step_time_s"]
    base_predicted = (base.get("predicted") or {}).get("step_time_s")
    rows = []
    for i, p in enumerate(points):
        predicted = p.get("predicted") or {}
        predicted_s = predicted.get("step_time_s")
        measured_speedup = _ratio(base_measured, p["step_time_s"])
        predicted_speedup = _ratio(base_predicted, predicted_s)
        rows.append({
            "run_id": p["run_id"], "label": p["label"], "knob": knob_label(p["parallelism"]),
            "grad_compression": p["parallelism"].get("grad_compression", "none"),
            "powersgd_rank": p["parallelism"].get("powersgd_rank", 0), "bucket_mb": p["parallelism"].get("bucket_mb"),
            "baseline": i == base_index,
            "measured_step_time_s": p["step_time_s"], "measured_step_time_s_stdev": p.get("step_time_s_stdev"),
            "predicted_step_time_s": predicted_s, "prediction_source": predicted.get("source"),
            "measured_over_predicted": _ratio(p["step_time_s"], predicted_s),
            "measured_speedup": measured_speedup, "predicted_speedup": predicted_speedup,
            "speedup_ratio": _ratio(measured_speedup, predicted_speedup),
            "sign_right": None if predicted_speedup is None or i == base_index or measured_speedup is None
            else (measured_speedup >= 1.0) == (predicted_speedup >= 1.0),
        })
    return {"baseline": {"run_id": base["run_id"], "label": base["label"], "why": why}, "model": base["model"],
            "ranks": base["ranks"], "backend": base["backend"], "rows": rows, "summary": _summary(rows),
            "sources": sorted({r["prediction_source"] for r in rows if r["prediction_source"]})}


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's two targets over the knobs compared: median |ratio of ratios - 1| and the sign right."""
    knobs = [r for r in rows if not r["baseline"] and r["speedup_ratio"] is not None]
    signs = [r["sign_right"] for r in knobs if r["sign_right"] is not None]
    return {"knobs_predicted": len(knobs), "knobs": sum(not r["baseline"] for r in rows),
            "median_speedup_error_pct": round(100.0 * median(abs(r["speedup_ratio"] - 1.0) for r in knobs), 1)
            if knobs else None,
            "sign_right": sum(signs), "sign_cases": len(signs)}


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt)


def knob_table(data: dict[str, Any]) -> Table:
    """One row per knob: measured, predicted, their ratio, speedups over the baseline and their ratio (the run
    column only when several runs are compared, so that the table fits 80 columns)."""
    base = data["baseline"]
    several = len({r["run_id"] for r in data["rows"]}) > 1
    title = (f"{data['model']}, {data['ranks']} {data['backend']} ranks: step time s, measured (meas) vs predicted "
             f"(pred), m/p their ratio; speedup (x) over {base['run_id']} {base['label']}")
    table = Table(title=title.rstrip(), show_edge=False)
    if several:
        table.add_column("run", no_wrap=True)
    table.add_column("knob", overflow="fold", min_width=10)
    for name in ("meas s", "pred s", "m/p", "meas x", "pred x", "ratio"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in data["rows"]:
        table.add_row(*[r["run_id"]] * several, escape(r["knob"] + (" (base)" if r["baseline"] else "")),
                      _num(r["measured_step_time_s"], ".3g"), _num(r["predicted_step_time_s"], ".3g"),
                      _num(r["measured_over_predicted"], ".3g"), _num(r["measured_speedup"], ".3f"),
                      _num(r["predicted_speedup"], ".3f"), _num(r["speedup_ratio"], ".3f"))
    return table


def knob_lines(data: dict[str, Any]) -> list[str]:
    """What the table compares against, and the targets' two numbers (or why they are missing)."""
    s = data["summary"]
    lines = [f"baseline: {data['baseline']['why']}; ratio = measured speedup / predicted speedup"]
    if data["sources"]:
        lines.append(f"predicted by: {', '.join(data['sources'])}")
    if s["knobs_predicted"]:
        lines.append(f"{s['knobs_predicted']} of {s['knobs']} knobs predicted: median |ratio - 1| "
                     f"{s['median_speedup_error_pct']:.1f}%, sign (helps / hurts) right in {s['sign_right']} of "
                     f"{s['sign_cases']}")
    else:
        lines.append("no prediction stored beside these points (CPU ranks are predicted only with --system "
                     "profile:NAME or a System); measured speedups only")
    return lines
