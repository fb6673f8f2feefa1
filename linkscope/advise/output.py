"""Which rows an answer shows, and the JSON documents of `advise train` and `advise infer`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from linkscope.advise.frontier import thin
from linkscope.advise.infer import InferAdvice, InferOption
from linkscope.advise.interconnect import InterconnectComparison
from linkscope.advise.train import TrainAdvice, TrainOption

FRONTIER = "frontier"
LIST = "list"
NEAREST_OTHERS = 3
"""Below a frontier of `--top` plans, still this many other offerings: where to go if the frontier's is full."""


@dataclass
class TrainSelection:
    """The rows to show: the top feasible ones (the frontier's plans, in that view), every infeasible one (with
    --all), and the nearest misses when nothing is feasible. `others` (frontier view): the next offerings by cost,
    each at its own cheapest plan within the limits, below the frontier (marked `frontier: false` in JSON)."""

    view: str
    top: list[TrainOption]
    infeasible: list[TrainOption]
    closest: list[TrainOption]
    hidden_infeasible: int
    others: list[TrainOption]


def select_train(advice: TrainAdvice, top: int, show_all: bool, view: str = LIST) -> TrainSelection:
    """`list`: the top `top` offerings by the objective. `frontier`: the frontier, thinned to `top` plans (its
    ends always kept), then the other feasible offerings. Infeasible rows only with `show_all`; near misses when
    nothing is feasible."""
    feasible, infeasible = advice.feasible, advice.infeasible
    closest = [] if feasible else infeasible[:top]
    shown = infeasible if show_all else []
    if view == FRONTIER and advice.frontier:
        front = thin(advice.frontier, top, lambda p: p.time_to_train_s)
        on = {(p.offering, p.nodes) for p in front}
        others = [r for r in feasible if (r.offering, r.nodes) not in on][:max(NEAREST_OTHERS, top - len(front))]
        return TrainSelection(view, front, shown, closest, len(infeasible) - len(shown), others)
    # A list asked for, or feasible offerings without a price (no cost frontier): the offerings by the objective.
    view = LIST if feasible else view
    return TrainSelection(view, feasible[:top], shown, closest, len(infeasible) - len(shown), [])


def _request_dict(advice: TrainAdvice, view: str) -> dict[str, Any]:
    req = advice.request
    return {"model": req.model.id, "tokens": req.tokens, "seq_len": req.seq_len, "global_batch": req.global_batch,
            "global_batch_is_default": req.global_batch_is_default, "precision": req.precision,
            "gpus": req.gpus.gpus, "gpus_range": None if req.gpus.gpus else [req.gpus.low, req.gpus.high],
            "view": view, "objective": req.objective.value if view == LIST else None,
            "deadline_s": req.limits.deadline_s, "deadline_is_default": req.limits.deadline_is_default,
            "deadline_given": req.limits.deadline_given, "deadline_met_by": "p90",
            "budget_usd": req.limits.budget_usd, "framework": req.framework,
            "peft": req.peft.as_dict() if req.peft else None}


def train_json(advice: TrainAdvice, selection: TrainSelection,
               comparison: InterconnectComparison | None) -> dict[str, Any]:
    """The `advise train --json` document: the request as understood, the rows (in the frontier view the frontier's
    plans first, then the other offerings, each with `frontier: true|false`), and the search size."""
    rows = selection.top + selection.others + selection.infeasible
    doc: dict[str, Any] = {
        "request": _request_dict(advice, selection.view),
        "rows": [r.as_dict() for r in rows],
        "closest": [r.as_dict() for r in selection.closest],
        "offerings_evaluated": len(advice.rows),
        "feasible": len(advice.feasible),
        "frontier_plans": len(advice.frontier),
        "plans_priced": len(advice.plans),
        "layouts_enumerated": advice.layouts_enumerated,
        "layouts_priced": advice.layouts_priced,
    }
    if comparison is not None:
        doc["interconnect"] = comparison.as_dict()
    return doc


@dataclass
class InferSelection:
    """What `advise infer` shows: the frontier's plans (or the top offerings by the objective), the next
    offerings below the frontier, and the offerings that cannot serve the job (all with --all)."""

    view: str
    top: list[InferOption]
    others: list[InferOption]
    infeasible: list[InferOption]
    hidden_infeasible: int


def select_infer(advice: InferAdvice, top: int, show_all: bool, view: str = LIST) -> InferSelection:
    """As `select_train`: the frontier thinned to `top` plans, then the next offerings by $/Mtok; or the top
    offerings by the objective (also when no plan has a price, so there is no cost frontier)."""
    feasible = [r for r in advice.rows if r.feasible]
    infeasible = [r for r in advice.rows if not r.feasible]
    shown = infeasible if show_all else (infeasible[:top] if not feasible else [])
    if view == FRONTIER and advice.frontier:
        front = thin(advice.frontier, top, lambda p: p.time_per_output_token_s)
        on = {r.offering for r in front}
        others = [r for r in feasible if r.offering not in on][:max(NEAREST_OTHERS, top - len(front))]
        return InferSelection(view, front, others, shown, len(infeasible) - len(shown))
    return InferSelection(LIST if feasible else view, feasible[:top], [], shown, len(infeasible) - len(shown))


def infer_json(advice: InferAdvice, selection: InferSelection,
               comparison: InterconnectComparison | None = None) -> dict[str, Any]:
    """The `advise infer --json` document: rows as `train_json`'s, each with `frontier: true|false`."""
    request = advice.request
    feasible = [r for r in advice.rows if r.feasible]
    doc: dict[str, Any] = {
        "request": {"model": request.model.id, "tokens_per_s_per_user": request.tokens_per_s_per_user,
                    "input_tokens": request.input_tokens, "output_tokens": request.output_tokens,
                    "qps": request.qps, "precision": request.precision, "engine": request.engine, "tp": request.tp,
                    "view": selection.view,
                    "objective": request.objective.value if selection.view == LIST else None},
        "rows": [r.as_dict() for r in selection.top + selection.others
                 + (selection.infeasible if feasible else [])],
        "closest": [] if feasible else [r.as_dict() for r in selection.infeasible],
        "offerings_evaluated": len(advice.rows),
        "feasible": len(feasible),
        "frontier_plans": len(advice.frontier),
    }
    if comparison is not None:
        doc["interconnect"] = comparison.as_dict()
    return doc
