"""Terminal view of `predict infer --disaggregated`: the plan beside colocated serving on the same GPUs."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from linkscope.advise.disagg import DisaggAdvice, Plan
from linkscope.advise.disagg_links import LinkComparison
from linkscope.advise.frontier import thin
from linkscope.model.step.kv_transfer import kv_constants
from linkscope.report.money import current_currency, money_text
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


def _ep(pool: dict[str, Any]) -> str:
    return f" ep {pool['ep']}" if pool.get("ep", 1) > 1 else ""


def disagg_table(d: dict[str, Any], budget: float | None) -> Table:
    """The plan and colocated serving side by side."""
    p, dec, c = d["prefill"], d["decode"], d["colocated"]
    title = (f"{d['model']} on {d['system']}, {d['input_tokens']} in / {d['output_tokens']} out: prefill "
             f"{p['instances']} x tp {p['tp']}, decode {dec['replicas']} x tp {dec['tp']}{_ep(dec)} at batch "
             f"{dec['batch']}, "
             f"KV over {d['kv']['path']}" + (f" (budget {budget:g} tokens/s per user)" if budget else ""))
    table = Table(title=title)
    table.add_column("")
    table.add_column(f"disaggregated ({p['gpus']} + {dec['gpus']} GPUs)", justify="right")
    table.add_column("colocated, same GPUs" + (f" (tp {c['tp']}{_ep(c)}, batch {c['batch']})" if c else ""),
                     justify="right")
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
    if d.get("range_note") and d["range_note"] != d.get("range_basis"):  # said once where the basis is the note
        lines.append(f"range note: {d['range_note']}")
    return lines


def _load_source(d: dict[str, Any]) -> str:
    if d["load_from"] == "qps":
        return "(--qps)"
    return f"({d['load_share']:.0%} of the smaller capacity of the two; --qps sets it)"


def _compact(title: str) -> Table:
    """No vertical rules and one space between columns, as `advise infer` prints its tables."""
    return Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
                 padding=(0, 0, 0, 1))


def _plan_cells(p: Plan) -> list[str]:
    return [p.offering, "coloc" if p.kind == "colocated" else "disagg", p.layout, p.kv_path or "-",
            str(p.nodes), seconds_text(p.ttft_s), seconds_text(p.tpot_s), f"{1.0 / p.tpot_s:.0f}",
            f"{p.tokens_per_s_per_gpu:.0f}", money_text(p.usd_per_million_tokens)]


def frontier_table(advice: DisaggAdvice, top: int) -> Table:
    """The time-cost frontier across offerings, disaggregated and colocated plans alike, cheapest first."""
    b, budget = advice.request.base, advice.request.ttft_budget_s
    shown = thin(advice.frontier, top, lambda p: p.tpot_s)
    title = (f"{b.model.id}, {b.input_tokens} in / {b.output_tokens} out, at {b.tokens_per_s_per_user:g} tokens/s "
             f"per user or more" + (f" and TTFT at most {budget:g} s" if budget else "")
             + f": {len(advice.frontier)} plans on the frontier, {len(shown)} shown, cheapest first")
    table = _compact(title)
    for name in ("offering", "serving", "layout", "KV", "nodes", "TTFT", "TPOT", "tok/s /user", "tok/s /GPU",
                 current_currency().unit("/Mtok")):
        table.add_column(name, justify="left" if name in ("offering", "serving", "layout", "KV") else "right")
    for p in shown:
        table.add_row(*_plan_cells(p))
    return table


def advise_lines(advice: DisaggAdvice) -> list[str]:
    """When colocated serving wins, and where; what the layouts mean."""
    decided = [a for a in advice.answers if a.winner]
    colocated = [a for a in decided if a.winner == "colocated"]
    lines = [f"colocated serving is cheaper per token on {len(colocated)} of the {len(decided)} offerings that "
             f"can serve the job; disaggregated on {len(decided) - len(colocated)}"]
    cheapest = decided[0] if decided else None
    if cheapest is not None and cheapest.disaggregated and cheapest.colocated:
        d, c = cheapest.disaggregated, cheapest.colocated
        lines.append(f"on {cheapest.offering}: {cheapest.winner} wins, {money_text(d.usd_per_million_tokens)} "
                     f"disaggregated ({d.layout}, KV over {d.kv_path}, TTFT {seconds_text(d.ttft_s)}) vs "
                     f"{money_text(c.usd_per_million_tokens)} colocated ({c.layout}, TTFT {seconds_text(c.ttft_s)})")
    lines.append("layout: P prefill instances x TP, D decode replicas x TP at batch b; TTFT at "
                 f"{kv_constants().load_share:.0%} of each plan's capacity")
    return lines


def links_table(c: LinkComparison) -> Table:
    """The same service colocated and disaggregated over each KV link, each at its price."""
    table = _compact(f"the same service on {c.gpu} ({c.offering}): colocated, and disaggregated with the KV "
                     "cache over each link")
    for name in ("serving", "KV link", "layout", "KV transfer", "TTFT", "TPOT", "tok/s /GPU",
                 current_currency().unit("/Mtok"), "price from"):
        table.add_column(name, justify="right" if name in ("KV transfer", "TTFT", "TPOT", "tok/s /GPU") else "left")
    for r in c.rows:
        p = r.plan
        if p is None:
            table.add_row(r.serving, r.kv_link, r.reason or "-", "", "", "", "", "", r.price.source)
            continue
        kv = seconds_text(p.details["kv_transfer_s"]) if "kv_transfer_s" in p.details else "-"
        table.add_row(r.serving, r.kv_link, p.layout, kv, seconds_text(p.ttft_s), seconds_text(p.tpot_s),
                      f"{p.tokens_per_s_per_gpu:.0f}", money_text(p.usd_per_million_tokens), r.price.source)
    return table
