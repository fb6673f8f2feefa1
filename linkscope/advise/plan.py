"""`plan`: lay a job's ranks on a System, say what launchers need, and what the placement saves over a naive one.

The placement keeps TP first (inside the node). With a model, the step model chooses the layout (micro-batch,
interleave, recomputation, ZeRO, experts) as `predict train` does, then prices that layout under every rank
order with TP first: the order only decides which groups (TP, CP, PP, DP, EP) share a node, and the step model
charges each group what it exposes under that order. The fastest order wins (Megatron-Core's default
`tp-cp-dp-pp` on a tie), so the plan's step is `predict train`'s, or differs from it by exactly the priced moves
of the groups. Without a model, Megatron-Core's default order is used and each group is priced on one 64 MiB
collective. The naive baseline moves TP to slowest-varying, which spreads TP groups over nodes as soon as there
are several.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.advise.placement import (DEFAULT_ORDER, Parallelism, Placement, group_spans, naive_order, place,
                                        rail_pairs, validate_parallelism)
from linkscope.advise.placement_cost import price_placement
from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.calibration.systems import ResolvedSystem
from linkscope.model.comm.tiers import CommTiers, check_multi_node
from linkscope.model.step.job import Job, framework_for
from linkscope.model.step.layout import Layout, layouts_of, order_spans
from linkscope.model.step.predict import validate_request
from linkscope.model.step.search import LayoutRequest, search
from linkscope.model.step.step_collectives import exposed_per_group_s, reference_items, step_items
from linkscope.model.step.train import StepEstimate, estimate_steps

PLAN_GROUPS = ("tp", "cp", "pp", "dp", "ep")
"""The groups a plan lists, in the order it lists them."""


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
    given: LayoutRequest = LayoutRequest()
    """What else the user fixed (micro-batch, interleave, recomputation, ZeRO, ep, etp, sequence parallelism);
    None fields are searched. Its degrees are replaced by `par`."""


@dataclass(frozen=True)
class GroupCost:
    """One kind of group under one rank order."""

    group: str
    ranks: int
    nodes: int
    """The most nodes one group of this kind spans."""
    tier: str
    """Basis `step`: the tier the step model sends the group's traffic over (nvlink, pcie, or the fabric between
    nodes). Basis `reference`: what bounds its 64 MiB collective (nvlink, pcie, network, latency)."""
    time_s: float
    """Basis `step`: the group's time on the step's critical path (exposed_per_group_s). Basis `reference`: one
    64 MiB collective."""
    collectives: list[dict[str, Any]] = field(default_factory=list)
    """Basis `step`: what the group issues per step (op, bytes as nccl-tests counts them, count)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class OrderCost:
    """One rank order priced: each group, and with a model the step time under that order."""

    order: str
    groups: dict[str, GroupCost]
    step_time_s: float | None = None


@dataclass
class PlanResult:
    """Both placements, their groups' costs and, with a model, their step times."""

    request: PlanRequest
    placement: Placement
    baseline: Placement
    cost: OrderCost
    baseline_cost: OrderCost
    basis: str
    """`step` (the step model's exposed time per group) or `reference` (one 64 MiB collective per group)."""
    order_reason: str
    layout: Layout | None = None
    megatron_cost: OrderCost | None = None
    """With a model: the same layout in Megatron-Core's default order, which `predict train` prices."""
    notes: list[str] = field(default_factory=list)

    @property
    def step_time_s(self) -> float | None:
        """The predicted step under the chosen order (None without a model)."""
        return self.cost.step_time_s

    @property
    def baseline_step_time_s(self) -> float | None:
        """The predicted step under the naive order."""
        return self.baseline_cost.step_time_s

    @property
    def framework(self) -> str | None:
        """The framework the step times assume (None for a bytes-only comparison, which has no job)."""
        job = self.request.job
        if job is None or self.layout is None:
            return None
        return framework_for(job.framework, self.layout.zero, self.layout.pp)

    def moves(self) -> dict[str, float]:
        """Per group, how much more (or, negative, less) the chosen order exposes than Megatron's default: the
        step time differs from `predict train`'s by exactly their sum."""
        if self.megatron_cost is None:
            return {}
        before = self.megatron_cost.groups
        return {g: c.time_s - before[g].time_s for g, c in self.cost.groups.items()
                if g in before and c.time_s != before[g].time_s}

    def rails(self) -> dict[str, tuple[int, int]]:
        """(cross-node pipeline pairs, of them on the same rail) for both placements."""
        return {"placement": rail_pairs(self.placement), "baseline": rail_pairs(self.baseline)}


def tp_first_orders() -> list[tuple[str, ...]]:
    """Every rank order with TP fastest-varying (TP inside the node), Megatron-Core's default first."""
    rest = [("tp", *r) for r in itertools.permutations(("cp", "dp", "pp"))]
    return [DEFAULT_ORDER, *(o for o in rest if o != DEFAULT_ORDER)]


def _validate(req: PlanRequest) -> None:
    validate_parallelism(req.system.system, req.nodes, req.par)
    if req.given.zero is not None and req.given.zero not in (0, 1, 2, 3):
        raise UserError(f"must be 0, 1, 2 or 3 (got {req.given.zero})", field="zero")
    if req.given.micro_batch is not None and req.given.micro_batch < 1:
        raise UserError(f"must be at least 1 (got {req.given.micro_batch})", field="micro_batch")


def _reference_cost(p: Placement, tiers: CommTiers) -> OrderCost:
    priced = price_placement(p, tiers, reference_items())
    return OrderCost(p.order_text, {d: GroupCost(d, c.ranks, c.nodes, c.limit, c.time_s)
                                    for d, c in priced.dims.items()})


def _without_model(req: PlanRequest, system: System, tiers: CommTiers) -> PlanResult:
    order = req.order or DEFAULT_ORDER
    baseline_order = req.baseline_order or naive_order(order)
    chosen, baseline = place(system, req.par, order), place(system, req.par, baseline_order)
    reason = "as given with --order" if req.order else "Megatron-Core's default; give --model to choose by step time"
    return PlanResult(req, chosen, baseline, _reference_cost(chosen, tiers), _reference_cost(baseline, tiers),
                      "reference", reason)


def _tier(nodes: float, tiers: CommTiers) -> str:
    """Where a group's traffic goes: the scale-up domain inside a node, else the fabric between nodes."""
    if nodes > 1:
        return tiers.fabric
    return "nvlink" if tiers.intra_hw == "nvlink" else "pcie"


def _step_cost(job: Job, layout: Layout, p: Placement, tiers: CommTiers) -> OrderCost:
    """The layout under the placement's order, priced by the step model: every group with its exposed time."""
    lay = layouts_of(layout)
    est: StepEstimate = estimate_steps(job, p.system, lay, tiers, p.order)
    exposed = exposed_per_group_s(est, lay)
    spans, model_spans = group_spans(p), order_spans(lay, p.system.nccl_node_gpus, p.order)
    items = step_items(job, layout)
    groups = {}
    for g in PLAN_GROUPS:
        ranks = layout.ep if g == "ep" else spans[g].ranks
        if ranks <= 1 and g == "ep":
            continue
        nodes = int(model_spans["ep"][1][0]) if g == "ep" else spans[g].nodes
        collectives = [{"op": op, "bytes": size, "count": count} for op, size, count in items[g]] if ranks > 1 else []
        groups[g] = GroupCost(g, ranks, nodes, _tier(float(model_spans[g][1][0]), tiers) if ranks > 1 else "none",
                              exposed[g], collectives)
    return OrderCost(p.order_text, groups, float(est.step_time_s[0]))


def _layout(req: PlanRequest, job: Job, system: System, tiers: CommTiers) -> tuple[Layout, bool]:
    """The step model's layout for the degrees given, as `predict train` searches it, and whether it fits."""
    par = req.par
    layout_req = replace(req.given, tp=par.tp, pp=par.pp, dp=par.dp, cp=par.cp)
    validate_request(job, system, layout_req)
    result = search(job, system, layout_req, tiers)
    return result.layouts.row(result.best), result.any_fits


def _with_model(req: PlanRequest, job: Job, system: System, tiers: CommTiers) -> PlanResult:
    layout, fits = _layout(req, job, system, tiers)
    orders = [req.order] if req.order else tp_first_orders()
    costs = {o: _step_cost(job, layout, place(system, req.par, o), tiers) for o in orders}
    # Ties go to the earlier order: Megatron-Core's default comes first.
    order = min(orders, key=lambda o: costs[o].step_time_s or 0.0)
    baseline_order = req.baseline_order or naive_order(order)
    baseline = place(system, req.par, baseline_order)
    megatron = costs.get(DEFAULT_ORDER) or _step_cost(job, layout, place(system, req.par, DEFAULT_ORDER), tiers)
    reason = "as given with --order" if req.order else "fastest predicted step of the orders with TP first"
    result = PlanResult(req, place(system, req.par, order), baseline, costs[order],
                        _step_cost(job, layout, baseline, tiers), "step", reason, layout, megatron)
    if not fits:
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
