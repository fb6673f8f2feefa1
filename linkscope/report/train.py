"""`bench train` as text: measured beside predicted for each point, the trace's communication, sweep and scaling."""

from __future__ import annotations

from typing import Any

from linkscope.model.ranges.mfu import MfuPeak


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt)


def _peak_label(doc: dict[str, Any]) -> str:
    """`989 TFLOP/s BF16 dense`: the peak the document's MFU is of."""
    return MfuPeak(gpu="", family="", precision=doc.get("mfu_precision") or "bf16",
                   tflops=float(doc["mfu_peak_tflops"])).label


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def _kinds(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in values.items()) or "none"


def point_lines(doc: dict[str, Any]) -> list[str]:
    """The comparison block of one point."""
    par = doc["parallelism"]
    pred = doc.get("predicted") or {}
    steps = doc.get("steps") or {}
    layout = f"{par['layout']} dp={par['dp']}" + (f" tp={par['tp']}" if par["tp"] > 1 else "") + \
        (f" zero={par['zero']}" if par["zero"] else "") + (f" ep={par['ep']}" if par.get("ep", 1) > 1 else "")
    lines = [
        f"# {doc['model']}: {doc['ranks']} ranks ({doc['backend']}), {layout}, {par['precision']}, "
        f"{doc['tokens_per_step']} tokens per step, recompute {par['recompute']}"
        + (f", LoRA rank {par['lora_rank']} (base frozen)" if par.get("lora_rank") else ""),
        f"# {'':<22}{'measured':>12}{'predicted':>12}{'error':>9}",
        f"# {'step time (s)':<22}{_num(doc['step_time_s']):>12}{_num(pred.get('step_time_s')):>12}"
        f"{_pct(doc.get('error_pct')):>9}",
        f"#   stdev / min / max   {_num(doc['step_time_s_stdev'])} / {_num(steps.get('step_time_s_min'))} / "
        f"{_num(steps.get('step_time_s_max'))} over {steps.get('steps', 0)} steps",
        f"# {'tokens/s':<22}{_num(doc['tokens_per_s'], '.1f'):>12}",
        f"# {'TFLOPS per rank':<22}{_num(doc['tflops_per_rank']):>12}",
        f"# {'MFU':<22}{_num(doc['mfu'], '.1%') if doc['mfu'] is not None else 'n/a (no peak)':>12}"
        + (f"   (of {_peak_label(doc)})" if doc.get("mfu_peak_tflops") else ""),
        f"# {'peak memory (GiB)':<22}{_num(doc['peak_memory_gib'], '.3f'):>12}"
        f"{_num(pred.get('memory_gib_per_gpu'), '.3f'):>12}   ({doc['peak_memory_kind']} vs model)",
    ]
    if len(steps.get("repeat_means_s") or []) > 1:
        lines.append("#   per repeat (s)      " + " / ".join(f"{v:.4g}" for v in steps["repeat_means_s"]))
    if pred.get("breakdown"):
        parts = {k: v for k, v in pred["breakdown"].items() if v}
        lines.append(f"# predicted breakdown: {_kinds(parts)} ({pred['source']})")
        lines += [f"#   {note}" for note in pred.get("notes") or []]
    lines += _trace_lines(doc)
    return lines


def _trace_lines(doc: dict[str, Any]) -> list[str]:
    trace = doc.get("trace")
    if not trace:
        return []
    lines = [f"# communication per step (s): {_kinds(doc['comm_s'])}; not overlapped by compute: "
             f"{_kinds(doc['exposed_comm_s'])}"]
    exposed_a2a = doc["exposed_comm_s"].get("all_to_all")
    if exposed_a2a is not None:
        # Expert parallelism's dispatch and combine, side by side with what the step model charges for them.
        predicted = ((doc.get("predicted") or {}).get("breakdown") or {}).get("ep_comm_exposed_s")
        lines.append(f"# exposed all-to-all per step (s): measured {exposed_a2a:.4g}, predicted "
                     f"{_num(predicted)} (ep_comm_exposed_s)")
    for r in trace["ranks"]:
        lines.append(f"#   rank {r['rank']}: compute {r['compute_s']:.4g} s, comm {_kinds(r['comm_s'])}, "
                     f"exposed {_kinds(r['exposed_comm_s'])}, overlap {_num(r['overlap_pct'], '.1f')}%")
    if trace.get("slowest_rank") is not None:
        lines.append(f"# slowest rank {trace['slowest_rank']} holds the others back by "
                     f"{trace['held_back_s']:.4g} s per step")
    lines.append(f"# profiled steps took {_num(trace.get('profiled_step_s'))} s each (reported apart; not in the "
                 "step times above)")
    lines.append(f"# trace: {', '.join(trace['paths'])}")
    return lines


def sweep_lines(verdict: dict[str, Any]) -> list[str]:
    """The sweep's table and its one-line verdict."""
    lines = [f"# sweep {verdict['key']} (baseline {verdict['baseline']})",
             f"# {'setting':<26}{'step_time_s':>12}{'speedup':>9}{'loss drop':>11}  trains"]
    for r in verdict["rows"]:
        lines.append(f"  {r['setting']:<26}{_num(r['step_time_s']):>12}{_num(r['speedup'], '.3f'):>9}"
                     f"{_num(r['loss_drop'], '.3f'):>11}  {'yes' if r['trains'] else 'NO'}")
    if verdict["winner"] is None:
        lines.append("# no setting trains like the baseline")
    elif verdict["winner"] == verdict["baseline"]:
        lines.append(f"# the baseline {verdict['baseline']} is the fastest; no other setting beats it")
    else:
        noise = "" if verdict.get("significant") else " (within the step-time noise: not a clear win)"
        lines.append(f"# winner: {verdict['winner']}, {verdict['speedup']:.3f}x the baseline's speed{noise}")
    for name in verdict["not_training"]:
        lines.append(f"# {name}: the loss does not decrease like the baseline's; not counted as a win")
    return lines


def scaling_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Speedup and efficiency per rank count, measured and predicted."""
    lines = [f"# {'ranks':>5}{'step_time_s':>12}{'tokens/s':>11}{'speedup':>9}{'efficiency':>11}"
             f"{'pred speedup':>13}{'pred eff':>9}"]
    for r in rows:
        lines.append(f"  {r['ranks']:>5}{_num(r['step_time_s']):>12}{_num(r['tokens_per_s'], '.1f'):>11}"
                     f"{_num(r['speedup'], '.3f'):>9}{_num(r['efficiency'], '.1%'):>11}"
                     f"{_num(r['predicted_speedup'], '.3f'):>13}{_num(r['predicted_efficiency'], '.1%'):>9}")
    return lines
