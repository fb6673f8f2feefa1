"""Which rows an answer shows, and the JSON documents of `advise train` and `advise infer`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from linkscope.advise.infer import InferOption, InferRequest
from linkscope.advise.interconnect import InterconnectComparison
from linkscope.advise.train import TrainAdvice, TrainOption


@dataclass
class TrainSelection:
    """The rows to show: the top feasible ones, every infeasible one (with --all), and the nearest misses
    when nothing is feasible."""

    top: list[TrainOption]
    infeasible: list[TrainOption]
    closest: list[TrainOption]
    hidden_infeasible: int


def select_train(advice: TrainAdvice, top: int, show_all: bool) -> TrainSelection:
    """Top `top` feasible rows; infeasible rows only with `show_all`; near misses when nothing is feasible."""
    feasible, infeasible = advice.feasible, advice.infeasible
    closest = [] if feasible else infeasible[:top]
    shown = infeasible if show_all else []
    return TrainSelection(feasible[:top], shown, closest, len(infeasible) - len(shown))


def _request_dict(advice: TrainAdvice) -> dict[str, Any]:
    req = advice.request
    return {"model": req.model.id, "tokens": req.tokens, "seq_len": req.seq_len, "global_batch": req.global_batch,
            "global_batch_is_default": req.global_batch_is_default, "precision": req.precision,
            "gpus": req.gpus.gpus, "gpus_range": None if req.gpus.gpus else [req.gpus.low, req.gpus.high],
            "objective": req.objective.value, "deadline_s": req.limits.deadline_s,
            "budget_usd": req.limits.budget_usd}


def train_json(advice: TrainAdvice, selection: TrainSelection,
               comparison: InterconnectComparison | None) -> dict[str, Any]:
    """The `advise train --json` document: the request as understood, the rows, and the search size."""
    rows = selection.top + selection.infeasible
    doc: dict[str, Any] = {
        "request": _request_dict(advice),
        "rows": [r.as_dict() for r in rows],
        "closest": [r.as_dict() for r in selection.closest],
        "offerings_evaluated": len(advice.rows),
        "feasible": len(advice.feasible),
        "layouts_enumerated": advice.layouts_enumerated,
        "layouts_priced": advice.layouts_priced,
    }
    if comparison is not None:
        doc["interconnect"] = comparison.as_dict()
    return doc


def infer_json(request: InferRequest, rows: list[InferOption], top: int, show_all: bool) -> dict[str, Any]:
    """The `advise infer --json` document."""
    feasible = [r for r in rows if r.feasible]
    infeasible = [r for r in rows if not r.feasible]
    return {
        "request": {"model": request.model.id, "tokens_per_s_per_user": request.tokens_per_s_per_user,
                    "input_tokens": request.input_tokens, "output_tokens": request.output_tokens,
                    "qps": request.qps, "precision": request.precision},
        "rows": [r.as_dict() for r in feasible[:top] + (infeasible if show_all else [])],
        "offerings_evaluated": len(rows),
        "feasible": len(feasible),
    }
