"""`bench kv` as text: GB/s and latency per block size and requests in flight, with the model's figure beside."""

from __future__ import annotations

from typing import Any

from linkscope.report.predict import human_bytes


def kv_lines(doc: dict[str, Any]) -> list[str]:
    """A header, one line per point, and where the model's figure comes from."""
    g = doc["geometry"]
    what = f"{doc['model']}: " if doc.get("model") else ""
    lines = [f"# KV pages: {what}{g['layers']} layers x {g['kv_heads']} KV heads x head dim {g['head_dim']}, "
             f"{g['tokens']} tokens per request, {g['kv_precision']}, {g['granularity']} granularity; "
             f"{doc['pairs']} pair(s) on {doc['backend']}, median of {doc['iters']} of the slowest rank",
             f"# {'block':>6} {'flight':>6} {'pages':>8} {'page':>10} {'bytes':>10} {'time (us)':>11} "
             f"{'GB/s':>8} {'model us':>10} {'model GB/s':>10} {'error':>7}"]
    for p in doc["points"]:
        predicted = p.get("predicted") or {}
        model_us = f"{predicted['time_us']:.4g}" if predicted else "-"
        model_bw = f"{predicted['gb_per_s']:.4g}" if predicted else "-"
        error = f"{p['error_pct']:+.0f}%" if p.get("error_pct") is not None else "-"
        lines.append(f"  {p['block_tokens']:>6} {p['in_flight']:>6} {p['messages_per_pair']:>8} "
                     f"{human_bytes(p['page_bytes']):>10} {human_bytes(p['bytes_per_pair']):>10} "
                     f"{p['time_us']:>11.4g} {p['gb_per_s']:>8.3g} {model_us:>10} {model_bw:>10} {error:>7}")
    lines.append(f"# model: {doc['source'] or 'none'}" + (f"; {doc['note']}" if doc.get("note") else ""))
    return lines
