"""`bench moe`'s printed lines: the measured dispatch and combine beside the prediction, as `bench train` prints
a measured step beside its prediction."""

from __future__ import annotations

from typing import Any

from linkscope.report.train import _num, _pct


def moe_lines(doc: dict[str, Any]) -> list[str]:
    """The measured figures (median over iterations of the slowest rank), bandwidth in DeepEP's convention, and the
    prediction with its error where there is one."""
    s = doc["shape"]
    predicted = doc.get("predicted") or {}
    errors = doc.get("error_pct") or {}
    lines = [
        f"# MoE dispatch/combine: {doc['ranks']} ranks ({doc['backend']}, {doc['nodes']} node"
        f"{'s' * (doc['nodes'] > 1)}), {s['tokens_per_rank']} tokens per rank x top-{s['topk']} of {s['experts']} "
        f"experts, hidden {s['hidden']}, {s['precision']} dispatch, skew {s['skew']:g}",
        f"# {doc['ranks_per_token']:.2f} ranks and {doc['nodes_per_token']:.2f} nodes per token; busiest rank "
        f"{doc['imbalance']:.3f}x the mean; {doc['token_bytes']['dispatch']} B out, {doc['token_bytes']['combine']} B "
        "back per token copy",
        f"# {'':<10} {'time (us)':>11} {'min':>10} {'max':>10} {'GB/s':>9} {'predicted us':>13} {'pred GB/s':>10} "
        f"{'error':>8}",
    ]
    for phase in ("dispatch", "combine"):
        lines.append(
            f"  {phase:<10} {_num(doc[f'{phase}_us'], '.5g'):>11} {_num(doc[f'{phase}_us_min']):>10} "
            f"{_num(doc[f'{phase}_us_max']):>10} {_num(doc[f'{phase}_gb_per_s']):>9} "
            f"{_num(predicted.get(f'{phase}_us'), '.5g'):>13} {_num(predicted.get(f'{phase}_gb_per_s')):>10} "
            f"{_pct(errors.get(phase)):>8}")
    lines.append(f"# median over {doc['iters']} iterations of the slowest rank's time; GB/s in DeepEP's convention "
                 "(token copies a rank receives inside a node, once per destination node across nodes)")
    if doc.get("ran_over"):
        lines.append(f"# ran over {doc['ran_over']}")
    if predicted:
        lines.append(f"# predicted with {predicted['source']}")
    if doc.get("note"):
        lines.append(f"# {doc['note']}")
    return lines
