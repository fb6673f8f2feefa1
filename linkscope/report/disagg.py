"""Terminal view of `predict infer --disaggregated`: the plan beside colocated serving on the same GPUs."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from linkscope.report.predict import human_bytes, range_text

STAGE_NAMES = {"prefill": "the prefill pool", "kv": "the KV link", "decode": "the decode pool"}


def seconds_text(value: float | None) -> str:
    """`12.3 ms`, `1.234 s`, or `-` when there is no figure (an overloaded answer)."""
    if value is None:
        return "-"
    return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"


def _with_range(value: float, span: list[float] | None) -> str:
    text = range_text(value, span or [])
    return f"{value:.1f}" + (f" ({text})" if text else "")


def _rows(d: dict[str, Any], c: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    col = c or {}
    util = d["utilisation"]
    return [
        ("time to first token", seconds_text(d["ttft_s"]), seconds_text(col.get("ttft_s"))),
        ("  queue for a prefill", seconds_text(d["prefill_queue_s"]), ""),
        ("  prefill", seconds_text(d["prefill_s"]), seconds_text(col.get("prefill_s"))),
        ("  KV transfer (after the prefill)", seconds_text(d["kv_transfer_s"]), "none"),
        ("  decode slot and first step", seconds_text(d["decode_queue_s"] + d["first_decode_step_s"]), ""),
        ("time per output token", seconds_text(d["tpot_s"]), seconds_text(col.get("tpot_s"))),
        ("tokens/s per user (1 / TPOT)", f"{d['tokens_per_s_per_user']:.1f}",
         f"{col['tokens_per_s_per_user']:.1f}" if c else "-"),
        ("tokens/s per GPU", _with_range(d["tokens_per_s_per_gpu"], d.get("tokens_per_s_per_gpu_range")),
         f"{col['tokens_per_s_per_gpu']:.1f}" if c else "-"),
        ("requests/s it serves at most", f"{min(d['capacity_requests_per_s'].values()):.3g}",
         f"{col['capacity_requests_per_s']:.3g}" if c else "-"),
        ("busy at the load priced", f"prefill {util['prefill']:.0%}, KV {util['kv']:.0%}, decode {util['decode']:.0%}",
         f"{col['utilisation']:.0%}" if c else "-"),
        ("memory per GPU", f"prefill {d['prefill']['memory_gib_per_gpu']:.1f} / decode "
                           f"{d['decode']['memory_gib_per_gpu']:.1f} GiB" + _fit(d['prefill']['fits']
                                                                                 and d['decode']['fits']),
         f"{col['memory_gib_per_gpu']:.1f} GiB" + _fit(col["fits"]) if c else "-"),
    ]


def _fit(fits: bool) -> str:
    return "" if fits else " (DOES NOT FIT)"


def disagg_table(d: dict[str, Any], budget: float | None) -> Table:
    """The plan and colocated serving side by side."""
    p, dec, c = d["prefill"], d["decode"], d["colocated"]
    ep = f" ep {dec['ep']}" if dec["ep"] > 1 else ""
    title = (f"{d['model']} on {d['system']}, {d['input_tokens']} in / {d['output_tokens']} out: prefill "
             f"{p['instances']} x tp {p['tp']}, decode {dec['replicas']} x tp {dec['tp']}{ep} at batch {dec['batch']}, "
             f"KV over {d['kv']['path']}" + (f" (budget {budget:g} tokens/s per user)" if budget else ""))
    table = Table(title=title)
    table.add_column("")
    table.add_column(f"disaggregated ({p['gpus']} + {dec['gpus']} GPUs)", justify="right")
    table.add_column("colocated, same GPUs" + (f" (tp {c['tp']}, batch {c['batch']})" if c else ""), justify="right")
    for row in _rows(d, c):
        table.add_row(*row)
    return table


def disagg_lines(d: dict[str, Any]) -> list[str]:
    """The KV transfer in words, the load, the bottleneck and the verdict."""
    kv = d["kv"]
    per_token = kv["bytes_per_request"] / d["input_tokens"]
    lines = [
        f"KV cache: {human_bytes(kv['bytes_per_request'])} per request ({human_bytes(per_token)} per token, "
        f"{d['kv_precision']}), {kv['pages']} pages of {kv['block_tokens']} tokens ({kv['granularity']} "
        f"granularity); the busiest rank moves {human_bytes(kv['bytes_busiest_rank'])} in "
        f"{kv['messages_busiest_rank']:.0f} messages of {human_bytes(kv['page_bytes'])} over {kv['path']} at "
        f"{kv['link_gb_per_s']:.1f} GB/s per GPU: {seconds_text(kv['transfer_s'])} per transfer (posting "
        f"{seconds_text(kv['posting_s'])}, wire {seconds_text(kv['wire_s'])}), "
        f"{seconds_text(kv['exposed_s'])} of it after the prefill"
        + (f" ({kv['stages']} stages overlapped)" if kv["overlap"] else ""),
        f"load: {d['requests_per_s']:.3g} requests/s " + _load_source(d),
        f"bottleneck: {STAGE_NAMES[d['bottleneck']]} bounds the throughput at "
        f"{d['capacity_requests_per_s'][d['bottleneck']]:.3g} requests/s",
        f"verdict: {d['verdict']['winner']} wins; {d['verdict']['why']}",
    ]
    if d.get("range_basis"):
        lines.append(f"ranges from {d['range_basis']}")
    return lines


def _load_source(d: dict[str, Any]) -> str:
    if d["load_from"] == "qps":
        return "(--qps)"
    return f"({d['load_share']:.0%} of the smaller capacity of the two; --qps sets it)"
