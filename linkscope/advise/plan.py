"""`plan`: lay a job's ranks on a System, say what launchers need, and what the placement saves over a naive one.

The placement keeps TP first (inside the node). With a model, every order with TP first is priced and the
fastest predicted step wins; without one, Megatron-Core's default order `tp-cp-dp-pp` is used. The naive
baseline moves TP to slowest-varying, which spreads TP groups over nodes as soon as there are several.
Predicted step time = the step model's time for Megatron's order (its own layout search for micro-batch,
interleave and recomputation) + the difference in TP/CP/PP collective time + the difference in the DP time
left exposed after the part the step model hides behind the backward pass.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from linkscope.advise.placement import (DEFAULT_ORDER, Parallelism, Placement, naive_order, place, rail_pairs,
                                        validate_parallelism)
from linkscope.advise.placement_cost import PlacementCost, price_placement
from linkscope.model.step.step_collectives import reference_items, step_items
from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.step.layout import Layout
from linkscope.model.step.predict import validate_request
from linkscope.model.step.search import LayoutRequest, search
from linkscope.model.calibration.systems import ResolvedSystem
from linkscope.model.comm.tiers import CommTiers, check_multi_node
from linkscope.model.step.job import Job, framework_for


@dataclass(frozen=True)
class PlanRequest:
    """A resolved System, a node count, the parallel degrees, and optionally the job for a step-time answer."""

    system: ResolvedSystem
    """`--system` as resolved: its tiers (measured ones for profile:NAME) and compute calibration apply."""
    nodes: int
    par: Parallelism
    order: tuple[str, ...] | None = None
    baseline_order: tuple[str, ...] | None = None
    job: Job | None = None
    micro_batch: int | None = None
    zero: int | None = None
    """ZeRO stage 0-3; None: the step model's search picks it (bytes-only plans have no gradients to shard)."""
    ep: int | None = None
    """Expert parallelism of an MoE model; None: searched with the layout."""
    etp: int | None = 1


@dataclass
class _Anchor:
    """The step model's answer for Megatron's order."""

    layout: Layout
    step_time_s: float
    dp_exposed_s: float
    fits: bool


@dataclass
class PlanResult:
    """Both placements, their collective costs and, with a model, their predicted step times."""

    request: PlanRequest
    placement: Placement
    baseline: Placement
    cost: PlacementCost
    baseline_cost: PlacementCost
    basis: str
    """`step` (collectives of one modelled step) or `reference` (one 64 MiB collective per group)."""
    order_reason: str
    step_time_s: float | None = None
    baseline_step_time_s: float | None = None
    layout: Layout | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def framework(self) -> str | None:
        """The framework the step times assume (None for a bytes-only comparison, which has no job)."""
        job = self.request.job
        if job is None or self.layout is None:
            return None
        return framework_for(job.framework, self.layout.zero, self.layout.pp)

    def rails(self) -> dict[str, tuple[int, int]]:
        """(cross-node pipeline pairs, of them on the same rail) for both placements."""
        return {"placement": rail_pairs(self.placement), "baseline": rail_pairs(self.baseline)}


def _anchor(req: PlanRequest, job: Job, system: System, tiers: CommTiers) -> _Anchor:
    par = req.par
    layout_req = LayoutRequest(tp=par.tp, pp=par.pp, dp=par.dp, cp=par.cp, micro_batch=req.micro_batch, zero=req.zero,
                               ep=req.ep, etp=req.etp)
    validate_request(job, system, layout_req)
    result = search(job, system, layout_req, tiers)
    i = result.best
    return _Anchor(result.layouts.row(i), float(result.estimate.step_time_s[i]),
                   float(result.estimate.dp_comm_exposed_s[i]), result.any_fits)


def _predicted_step_s(anchor: _Anchor, megatron: PlacementCost, cost: PlacementCost) -> float:
    # The DP time the step model hides behind the backward pass hides the same way under any placement.
    hidden = max(megatron.dp_s - anchor.dp_exposed_s, 0.0)

    def exposed(c: PlacementCost) -> float:
        return max(c.dp_s - hidden, 0.0)

    return anchor.step_time_s + cost.critical_s - megatron.critical_s + exposed(cost) - exposed(megatron)


def tp_first_orders() -> list[tuple[str, ...]]:
    """Every rank order with TP fastest-varying (TP inside the node)."""
    return [("tp", *rest) for rest in itertools.permutations(("cp", "dp", "pp"))]


def _validate(req: PlanRequest) -> None:
    validate_parallelism(req.system.system, req.nodes, req.par)
    if req.zero is not None and req.zero not in (0, 1, 2, 3):
        raise UserError(f"must be 0, 1, 2 or 3 (got {req.zero})", field="zero")
    if req.micro_batch is not None and req.micro_batch < 1:
        raise UserError(f"must be at least 1 (got {req.micro_batch})", field="micro_batch")


def _without_model(req: PlanRequest, system: System, tiers: CommTiers) -> PlanResult:
    order = req.order or DEFAULT_ORDER
    baseline_order = req.baseline_order or naive_order(order)
    chosen, baseline = place(system, req.par, order), place(system, req.par, baseline_order)
    items = reference_items()
    reason = "as given with --order" if req.order else "Megatron-Core's default; give --model to choose by step time"
    return PlanResult(req, chosen, baseline, price_placement(chosen, tiers, items),
                      price_placement(baseline, tiers, items), "reference", reason)


def _with_model(req: PlanRequest, job: Job, system: System, tiers: CommTiers) -> PlanResult:
    anchor = _anchor(req, job, system, tiers)
    items = step_items(job, anchor.layout)
    megatron = price_placement(place(system, req.par, DEFAULT_ORDER), tiers, items)
    orders = [req.order] if req.order else tp_first_orders()
    costs = {o: price_placement(place(system, req.par, o), tiers, items) for o in orders}
    order = min(orders, key=lambda o: (_predicted_step_s(anchor, megatron, costs[o]), o != DEFAULT_ORDER))
    baseline_order = req.baseline_order or naive_order(order)
    baseline_cost = price_placement(place(system, req.par, baseline_order), tiers, items)
    reason = "as given with --order" if req.order else "fastest predicted step of the orders with TP first"
    result = PlanResult(req, place(system, req.par, order), place(system, req.par, baseline_order), costs[order],
                        baseline_cost, "step", reason, _predicted_step_s(anchor, megatron, costs[order]),
                        _predicted_step_s(anchor, megatron, baseline_cost), anchor.layout)
    if not anchor.fits:
        result.notes.append("this layout does not fit in GPU memory; times are for the least-memory variant")
    return result


def searched_parallelism(resolved: ResolvedSystem, nodes: int, job: Job, given: LayoutRequest) -> Parallelism:
    """`--tp/--pp/--dp/--cp auto`: the degrees of the step model's best layout on `nodes` nodes, the given
    ones kept."""
    sized = resolved.system.with_nodes(nodes)
    validate_request(job, sized, given)
    with resolved.computing():
        result = search(job, sized, given, resolved.tiers)
    lay, i = result.layouts, result.best
    return Parallelism(tp=int(lay.tp[i]), pp=int(lay.pp[i]), dp=int(lay.dp[i]), cp=int(lay.cp[i]))


def make_plan(req: PlanRequest) -> PlanResult:
    """Place the ranks, price both placements, and predict step times when a model is given."""
    _validate(req)
    system, tiers = req.system.system.with_nodes(req.nodes), req.system.tiers
    check_multi_node(tiers, system.nccl_nodes)
    if req.job is None:
        return _without_model(req, system, tiers)
    with req.system.computing():
        result = _with_model(req, req.job, system, tiers)
    result.notes.extend(req.system.training_notes)
    return result
