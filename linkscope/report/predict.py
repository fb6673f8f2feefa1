"""Terminal views of predictions: collective sweeps, a training step's breakdown, inference, scaling."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from linkscope.model.comm.moe import MoePrediction
from linkscope.model.comm.predict import CollectivePrediction
from linkscope.model.ranges.mfu import MfuPeak
from linkscope.model.step.predict import TrainPrediction
from linkscope.model.step.scaling import ScalingPoint


def human_bytes(nbytes: float) -> str:
    """1024-based sizes as nccl-tests users write them: 8 B, 64 KiB, 16 MiB."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:g} {unit}" if unit == "B" else f"{value:.4g} {unit}"
        value /= 1024
    return f"{value:g}"


def range_text(value: float, span: tuple[float, float] | list[float]) -> str:
    """A p10..p90 range as percentages of the central value: `-10%/+47%`."""
    if not span or value <= 0:
        return ""
    lo, hi = span
    return f"{lo / value - 1:+.0%}/{hi / value - 1:+.0%}"


def _span(value: float, span: list[float], suffix: str) -> str:
    """` (-10%/+47%, p10..p90)`, or nothing when the prediction carries no range."""
    text = range_text(value, span)
    return f" ({text}{suffix})" if text else ""


def _rate(value: float, digits: int = 0) -> str:
    """A rate with thousands separators, or three significant figures when it is below one unit."""
    return f"{value:,.{digits}f}" if value >= 1 or value == 0 else f"{value:.3g}"


def _count(value: float) -> str:
    """A parameter count in B, M below a billion, K below a million (a small model is never "0.0 B" or "0.0 M")."""
    if value >= 1e9:
        return f"{value / 1e9:.1f} B"
    if value >= 1e6:
        return f"{value / 1e6:.1f} M"
    return f"{value / 1e3:.1f} K" if value >= 1e3 else f"{value:.0f}"


def _gib(value: float) -> str:
    """GiB to one decimal, or two significant figures below 0.1 (never a bare 0.0 for a real amount)."""
    return f"{value:.1f}" if value >= 0.1 or value == 0 else f"{value:.2g}"


def link_text(limit: str) -> str:
    """`network (infiniband)` -> `infiniband`: the fabric names the network well enough in a narrow column."""
    return limit.removeprefix("network (").removesuffix(")") if limit.startswith("network (") else limit


def collective_table(rows: list[CollectivePrediction], title: str) -> Table:
    """One row per size, nccl-tests' columns plus the time's p10..p90 range, the algorithm and protocol (NCCL's
    log calls them algo and proto) and what limits it; short headers keep the table whole at 80 columns."""
    table = _compact_table(title)
    for name in ("size", "time\n(us)", "range", "algbw\n(GB/s)", "busbw\n(GB/s)", "algo", "proto", "limit"):
        # Cells stay whole (a folded number misreads); two-line headers leave them the room.
        table.add_column(name, justify="right" if "(" in name or name in ("size", "range") else "left",
                         no_wrap=True)
    for r in rows:
        table.add_row(human_bytes(r.bytes), f"{r.time_us:,.2f}", range_text(r.time_us, r.time_us_range),
                      f"{r.algbw:.2f}", f"{r.busbw:.2f}", r.algorithm, r.protocol, link_text(r.bottleneck))
    return table


def moe_table(p: MoePrediction, title: str) -> Table:
    """One MoE dispatch and combine: time, range and bandwidth in DeepEP's convention."""
    table = _compact_table(title)
    for name in ("", "time\n(us)", "range", "GB/s", "bytes per\nrank", "limit"):
        table.add_column(name, justify="left" if name in ("", "limit") else "right", no_wrap=True)
    table.add_row("dispatch", f"{p.dispatch_us:,.1f}", range_text(p.dispatch_us, p.dispatch_us_range),
                  _gb_per_s_text(p.dispatch_gb_per_s), human_bytes(int(p.bytes_per_rank)), p.bottleneck)
    table.add_row("combine", f"{p.combine_us:,.1f}", range_text(p.combine_us, p.combine_us_range),
                  _gb_per_s_text(p.combine_gb_per_s), human_bytes(int(p.combine_bytes_per_rank)), p.bottleneck)
    return table


def _gb_per_s_text(gb_per_s: float) -> str:
    # Tiny messages move a few bytes per microsecond; three significant digits keep them from printing as 0.
    return f"{gb_per_s:.1f}" if gb_per_s >= 1 else f"{gb_per_s:.3g}"


def _seconds(value: float) -> str:
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.3f} s"


def train_table(p: TrainPrediction) -> Table:
    """A training step: headline figures, the resolved layout and where the time goes."""
    table = Table(title=f"{p.model} on {p.system}: {p.gpus} {p.rank_kind}s ({p.nodes} node{'s' * (p.nodes > 1)})",
                  show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    par = p.parallelism
    layout = (f"tp {par.tp}  pp {par.pp}  dp {par.dp}  cp {par.cp}  interleave {par.interleave}  "
              f"micro-batch {par.micro_batch}  recompute {par.recompute}  zero {par.zero}"
              f"{'  +SP' if par.sequence_parallel else ''}"
              f"{f'  ep {par.ep}  etp {par.etp}' if par.ep * par.etp > 1 else ''}")
    params = _count(p.total_params)
    if p.active_params != p.total_params:
        params += f" ({_count(p.active_params)} active per token)"
    rows: list[tuple[str, str]] = [
            ("parameters", params),
            ("assumed batch", f"global batch {p.global_batch} x seq len {p.seq_len} tokens"),
            ("step time", f"{_seconds(p.step_time_s)}{_span(p.step_time_s, p.step_time_s_range, ', p10..p90')}"),
            ("tokens/s", f"{_rate(p.tokens_per_s)}{_span(p.tokens_per_s, p.tokens_per_s_range, '')}"),
            (f"TFLOPS per {p.rank_kind}", _rate(p.tflops_per_gpu, 1)),
            ("MFU", p.peak.text(p.mfu) if p.mfu > 0 else "-"),
            (f"memory per {p.rank_kind}", f"{_gib(p.memory_gib_per_gpu)} GiB" + (
                f" of {p.memory_gib_available:.1f} ({'fits' if p.fits else 'DOES NOT FIT'})"
                if p.memory_gib_available > 0 else " (what the host holds is not known here)")),
            ("layout", layout), ("bottleneck", p.bottleneck)]
    if p.expert_layout:
        rows.insert(-1, ("expert layout", p.expert_layout))
    if p.peft is not None:
        share = p.trainable_params / p.frozen_params
        rows.insert(1, ("fine-tune", f"LoRA rank {p.peft['rank']} on {p.peft['targets']}, {p.peft['base_precision']} "
                                     f"frozen base: {p.trainable_params / 1e6:,.1f}M trainable ({share:.2%}) of "
                                     f"{p.frozen_params / 1e9:,.1f}B"))
    if p.framework != "auto":
        rows.insert(-1, ("framework", p.framework + ("" if p.framework_given else " (the usual one for this ZeRO "
                                                                               "stage; --framework to choose)")))
    for key, value in p.breakdown.items():
        if value > 0:
            rows.append((f"  {key.removesuffix('_s').replace('_', ' ')}", f"{_seconds(value)} "
                                                                            f"({value / p.step_time_s:.0%})"))
    for flag in p.flags:
        rows.append(("[yellow]warning[/]", flag))
    for what, text in rows:
        table.add_row(what, text)
    return table


ENGINE_TEXT = {"overlapped": "overlapped (host loop beside the GPU's steps; --engine serial for vLLM V0)",
               "serial": "serial (host work per sequence between GPU steps, as vLLM V0)"}
"""How `predict infer` names each engine (model/step/compute.py, ENGINES)."""


def infer_table(data: dict[str, Any], budget: float | None) -> Table:
    """One serving configuration."""
    wide = data.get("ep", 1) > 1
    ep_text = f" ep {data['ep']}" if wide else ""
    title = (f"{data['model']} on {data['system']}: tp {data['tp']} pp {data['pp']}{ep_text}, batch {data['batch']}"
             f"{' per attention replica' if wide else ''}")
    table = Table(title=title, show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    mode = ("with other users' prefills" if data["prefill_interference"]
            else "decode only, no other users' prefills")
    rows = [("time to first token (prefill)", _seconds(data["ttft_s"])),
            ("decode step", _seconds(data["decode_step_s"])),
            ("time per output token", f"{_seconds(data['tpot_s'])} ({mode})"),
            ("tokens/s per user (1 / TPOT)", f"{data['tokens_per_s_per_user']:.1f} "
                                  f"({range_text(data['tokens_per_s_per_user'], data['tokens_per_s_per_user_range'])})"
                                  + (f" (budget {budget:g})" if budget else "")),
            ("tokens/s per GPU", f"{data['tokens_per_s_per_gpu']:.1f} "
                                 f"({range_text(data['tokens_per_s_per_gpu'], data['tokens_per_s_per_gpu_range'])}, "
                                 "p10..p90)"),
            ("serving engine", ENGINE_TEXT.get(data.get("engine", ""), str(data.get("engine", "")))),
            ("TP all-reduce share of prefill", f"{data['tp_allreduce_share_prefill']:.0%}"),
            ("TP all-reduce share of decode", f"{data['tp_allreduce_share_decode']:.0%}"),
            ("memory per GPU",
             f"{_gib(data['memory_gib_per_gpu'])} GiB ({'fits' if data['fits'] else 'DOES NOT FIT'})"),
            ("ranges from", data["range_basis"])]
    if data.get("mfu_peak_tflops"):
        peak = MfuPeak(gpu="", family="", precision=data["mfu_precision"], tflops=data["mfu_peak_tflops"])
        rows.insert(5, ("serving MFU (output tokens)", peak.text(data["serving_mfu"])))
    if wide:
        rows.insert(-2, ("EP all-to-all share of decode", f"{data['ep_all_to_all_share_decode']:.0%}"))
    if "moe_transport" in data:
        rows.insert(-2, ("EP kernel and transport", f"{data['moe_kernel']} over {data['moe_transport']} "
                                                     f"({data['moe_transport_reason']})"))
    if data.get("range_note"):
        rows.append(("range note", data["range_note"]))
    rows += [("[yellow]warning[/]", flag) for flag in data.get("flags", [])]
    for what, value in rows:
        table.add_row(what, value)
    return table


def _compact_table(title: str) -> Table:
    """No vertical rules and one space between columns: wide numeric tables stay whole at 80 columns."""
    return Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                 padding=(0, 0, 0, 1))


SCALING_WIDE_COLUMNS = 100
"""Below this terminal width the scaling table leaves out GPU speedup and MFU (--json has them)."""


def scaling_table(points: list[ScalingPoint], title: str, width: int = SCALING_WIDE_COLUMNS) -> Table:
    """Speedup and efficiency per node count with the layout chosen there (dimensions of size 1 left out); a
    count where nothing fits says why and shows no figures."""
    table = _compact_table(title)
    names = ["nodes", "GPUs", "global\nbatch", "step\ntime", "range", "tokens/s", "speedup", "GPU\nspeedup",
             "effi-\nciency", "MFU", "layout"]
    if width < SCALING_WIDE_COLUMNS:
        names = [n for n in names if n not in ("GPU\nspeedup", "MFU")]
    for name in names:
        table.add_column(name, justify="left" if name == "layout" else "right", no_wrap=True)
    for p in points:
        cells = {"nodes": str(p.nodes), "GPUs": str(p.gpus), "global\nbatch": str(p.global_batch)}
        if p.step_time_s is None or p.tokens_per_s is None or p.parallelism is None:
            cells["layout"] = "no fit" if p.reason and p.reason.startswith("does not fit") else "cannot run"
        else:
            par = p.parallelism
            dims = [f"{d}{par.degree(d)}" for d in ("tp", "pp", "dp", "cp") if par.degree(d) > 1 or d == "dp"]
            cells.update({"step\ntime": _seconds(p.step_time_s),
                          "range": range_text(p.step_time_s, p.step_time_s_range),
                          "tokens/s": f"{p.tokens_per_s:,.0f}", "MFU": f"{p.mfu or 0.0:.1%}", "layout": " ".join(dims)})
        if p.speedup is not None and p.gpu_speedup is not None and p.efficiency is not None:
            cells.update({"speedup": f"{p.speedup:.2f}", "GPU\nspeedup": f"{p.gpu_speedup:.1f}",
                          "effi-\nciency": f"{p.efficiency:.1%}"})
        table.add_row(*(cells.get(n, "") for n in names))
    peaks = {p.peak.label for p in points if p.fits and p.mfu_peak_tflops > 0}
    if "MFU" in names and peaks:
        table.caption = f"MFU of {', '.join(sorted(peaks))} per GPU"
    return table


def scaling_reasons(points: list[ScalingPoint]) -> list[str]:
    """One line per node count without figures, saying why, then one per evidence class the rows' ranges lack."""
    missing = dict.fromkeys(p.range_note for p in points if p.fits and p.range_note)
    return [*(f"{p.nodes} node{'s' * (p.nodes > 1)}: {p.reason}" for p in points if p.reason),
            *(f"ranges: {basis}" for basis in missing)]
