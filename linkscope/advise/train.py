"""`advise train`: the same training job on every offering, each with its best layout, as a time–cost frontier
or ranked by total cost or total time ("decide by the total time and total cost of the same task").

Per offering: the node counts it can be booked at, the fastest layout that fits at each (the bulk search in
`engine`), time to train = tokens / (tokens per second), cost = price per node-hour x nodes x hours. Every
(offering, node count) within the deadline and budget is a plan; the frontier is the plans no other beats on both
time and cost (`frontier`), and each offering's row is its best count by the objective. Offerings that cannot run
the job stay in the answer with the reason, so "why is X not listed" always has an answer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any
from collections.abc import Hashable

from linkscope.advise.bookable import GpuRequest, bookable_node_counts
from linkscope.advise.booking import Booking, bookings
from linkscope.advise.bottleneck import bottleneck_label
from linkscope.advise.engine import LayoutPool, NodeTypeResult, evaluate_node_type, usable_memory_gib
from linkscope.advise.frontier import pareto, roles
from linkscope.advise.objective import COST_TIE, Limits, Objective, rank_key
from linkscope.hardware.errors import UserError
from linkscope.hardware.offering import Offering
from linkscope.hardware.system import System
from linkscope.model.calibration.systems import ResolvedSystem, resolve_offering
from linkscope.model.ranges.accuracy import spread, time_range
from linkscope.model.step.compute import PRECISIONS
from linkscope.model.step.layout import Layout
from linkscope.model.step.predict import TrainPrediction, idle_gpus_note, summarize
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.job import Job
from linkscope.model.step.knobs import Knobs, check_knobs, constrained_zero, knob_framework
from linkscope.model.step.memory import gradient_bytes
from linkscope.model.step.peft import Peft, check_peft_gpu
from linkscope.model.step.transformer import ModelConfig



@dataclass(frozen=True)
class TrainRequest:
    """One training job to place: what, how much, on how many GPUs, and what counts as best."""

    model: ModelConfig
    tokens: float
    global_batch: int
    seq_len: int
    gpus: GpuRequest = GpuRequest()
    objective: Objective = Objective.COST
    limits: Limits = Limits()
    precision: str = "bf16"
    global_batch_is_default: bool = False
    ep: int | None = None
    """Expert parallelism of an MoE model's expert layers; None: searched."""
    etp: int | None = 1
    moe_dispatcher: str = "alltoall"
    peft: Peft | None = None
    """A LoRA fine-tune of the frozen model (None: full training)."""
    framework: str = "auto"
    moe_transport: str = "auto"
    """How the dispatcher's all-to-alls reach other GPUs (model/comm/moe.py TRANSPORT_CHOICES)."""
    knobs: Knobs = Knobs()
    """Data-parallel communication knobs (gradient compression, bucket size, ZeRO++)."""

    def job(self) -> Job:
        """The model's view of one step."""
        return Job(model=self.model, global_batch=self.global_batch, seq_len=self.seq_len, precision=self.precision,
                   moe_dispatcher=self.moe_dispatcher, peft=self.peft,
                   framework=knob_framework(self.knobs, self.framework), knobs=self.knobs,
                   moe_transport=self.moe_transport)

    def layout_request(self) -> LayoutRequest:
        """What the layout search may not choose: the expert parallelism given, and the ZeRO stage the knobs need."""
        return LayoutRequest(ep=self.ep, etp=self.etp, zero=constrained_zero(self.knobs, None))


def validate_train_request(request: TrainRequest) -> None:
    """Reject values no offering could ever satisfy, naming the flag."""
    m = request.model
    if (request.ep or 1) > 1 and not m.is_moe:
        raise UserError(f"{m.id} has no experts (a dense model); expert parallelism needs an MoE model", field="ep")
    if request.ep is not None and m.is_moe and (request.ep < 1 or m.experts % request.ep):
        raise UserError(f"{request.ep} does not divide the {m.experts} experts of {m.id}", field="ep")
    if request.precision not in PRECISIONS:
        raise UserError(f"unknown format '{request.precision}' (choose from {', '.join(PRECISIONS)})",
                        field="precision")
    if request.seq_len < 1:
        raise UserError(f"must be at least 1 (got {request.seq_len})", field="seq_len")
    if request.global_batch < 1:
        raise UserError(f"must be at least 1 (got {request.global_batch})", field="global_batch")
    if request.gpus.gpus is not None and request.gpus.gpus < 1:
        raise UserError(f"must be at least 1 (got {request.gpus.gpus})", field="gpus")
    job = request.job()
    check_knobs(request.knobs, m, job.framework, request.layout_request().zero, gradient_bytes(job))


@dataclass(frozen=True)
class TrainOption:
    """One offering's answer: its best node count and layout, or why it cannot run the job.

    Made once, never changed: a feasible option carries everything its row shows, an infeasible one its
    `reason` (and what it measured on the way, e.g. the memory it would need)."""

    offering: str
    provider: str
    gpu: str
    gpus_per_node: int
    price_per_hour: float | None
    price_unconfirmed: bool = False
    """The price is a secondary or unconfirmed figure (the catalog marks it); costs carry a `?`."""
    feasible: bool = False
    reason: str | None = None
    nodes: int | None = None
    gpus: int | None = None
    parallelism: Layout | None = None
    framework: str | None = None
    """How the plan's data-parallel communication is scheduled (model/step/job.py FRAMEWORKS)."""
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    time_to_train_s: float | None = None
    cost_usd: float | None = None
    time_to_train_s_range: list[float] | None = None
    """p10..p90 from the training predictions' leave-one-source-out errors; ranking uses the central value."""
    cost_usd_range: list[float] | None = None
    mfu: float | None = None
    """Against `mfu_peak_tflops`, the dense peak of `mfu_precision` (model/ranges/mfu.py); not a ranking input:
    plans rank on time and cost."""
    mfu_peak_tflops: float | None = None
    mfu_precision: str | None = None
    memory_gib_per_gpu: float | None = None
    memory_gib_available: float | None = None
    booked_nodes: int | None = None
    """Nodes paid for: more than `nodes` where the offering is booked in whole NVLink domains."""
    bottleneck: str | None = None
    bottleneck_detail: str | None = None
    breakdown: dict[str, float] | None = None
    measured_profile: str | None = None
    notes: list[str] = field(default_factory=list)
    profile_notes: list[str] = field(default_factory=list)
    """What a saved profile of this offering changed (or why it could not be used); also in `notes`."""
    frontier: bool = False
    """This plan (offering and node count) is on the time–cost frontier across every offering."""
    frontier_role: str | None = None
    """On the frontier: `cheapest` and `fastest` at its two ends, `between` for the points between; None off it."""

    @property
    def p90_time_s(self) -> float:
        """The time held to the deadline: the p90 of the time to train (its central value where it has no range)."""
        span = self.time_to_train_s_range
        return span[-1] if span else (self.time_to_train_s or 0.0)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.__dict__, "parallelism": self.parallelism.as_dict() if self.parallelism else None}


@dataclass
class _Plan:
    """What will be evaluated for one offering booked one way."""

    offering: Offering
    resolved: ResolvedSystem
    """The offering as resolved and booked: a profile measured on it replaces its tiers and scales its compute."""
    key: Hashable
    counts: list[int]
    reason: str | None
    booking: Booking

    @property
    def system(self) -> System:
        """The System the job runs on, as booked."""
        return self.booking.system

    @property
    def profile(self) -> str | None:
        """The profile whose figures are used, if any."""
        return self.resolved.profile_name

    @property
    def notes(self) -> tuple[str, ...]:
        """What the offering's profile changed, or why it could not be used."""
        return self.resolved.training_notes


@dataclass
class TrainAdvice:
    """Every offering's option, feasible ones first in objective order, and how much was searched."""

    request: TrainRequest
    rows: list[TrainOption]
    layouts_enumerated: int
    layouts_priced: int
    plans: list[TrainOption] = field(default_factory=list)
    """Every (offering, node count) that runs the job, each marked feasible or with the limit it breaks."""
    frontier: list[TrainOption] = field(default_factory=list)
    """The feasible plans no other feasible plan beats on both time and cost, cheapest first."""

    @property
    def feasible(self) -> list[TrainOption]:
        """Options that run the job within the limits, best first."""
        return [r for r in self.rows if r.feasible]

    @property
    def infeasible(self) -> list[TrainOption]:
        """Options that cannot, nearest misses first."""
        return [r for r in self.rows if not r.feasible]

    def fastest_plan(self) -> TrainOption | None:
        """The fastest plan of all, within the limits or not (what "nothing meets the deadline" names)."""
        return min(self.plans, key=lambda p: rank_key(Objective.TIME, p.time_to_train_s or 0.0, p.cost_usd),
                   default=None)

    def cheapest_plan(self, within_deadline: bool = False) -> TrainOption | None:
        """The cheapest priced plan of all (or of those whose p90 is within the deadline)."""
        deadline = self.request.limits.deadline_s
        priced = [p for p in self.plans if p.cost_usd is not None
                  and not (within_deadline and deadline is not None and p.p90_time_s > deadline)]
        return min(priced, key=lambda p: p.cost_usd or 0.0, default=None)


def _plans(offering: Offering, request: TrainRequest) -> list[_Plan]:
    """What to evaluate for one offering: one plan per way it can be booked (booking.bookings)."""
    return [_plan(offering, request, booking) for booking in bookings(offering)]


def _plan(offering: Offering, request: TrainRequest, booking: Booking) -> _Plan:
    resolved = resolve_offering(offering)
    if booking.system is not offering.system:
        # Nodes booked one by one: the catalog's figures for their own NVLink (a profile measured the whole domain).
        resolved = replace(ResolvedSystem.plain(booking.system), spec=offering.id)
    node = booking.system.node
    # Offerings with the same node type and no profile of their own share one evaluation.
    key: Hashable = node if resolved.profile is None else (node, "profile", resolved.profile.name)
    if request.precision == "fp8" and node.gpu.fp8_dense_tflops is None:
        return _Plan(offering, resolved, key, [], f"no FP8 tensor cores on {node.gpu.id}", booking)
    base_problem = check_peft_gpu(request.peft, node.gpu.id, node.gpu.fp8_dense_tflops is not None)
    if base_problem:
        return _Plan(offering, resolved, key, [], base_problem.removeprefix("--base-precision "), booking)
    problem = _transport_problem(request, resolved)
    if problem:
        return _Plan(offering, resolved, key, [], problem, booking)
    counts, reason = bookable_node_counts(offering, resolved.tiers, request.gpus, booking.system)
    return _Plan(offering, resolved, key, counts, reason, booking)


def _transport_problem(request: TrainRequest, resolved: ResolvedSystem) -> str | None:
    """Why the --transport asked for cannot carry this offering's expert all-to-alls across its nodes (nvlink
    only rules out layouts whose experts cross nodes, which the search leaves out)."""
    if not request.model.is_moe or request.moe_transport in ("auto", "nvlink"):
        return None
    from linkscope.model.comm.moe import transport_problem

    kernel = "deepep-normal" if request.moe_dispatcher == "deepep" else "nccl"
    return transport_problem(resolved.tiers, kernel, request.moe_transport, 2)


def _evaluate(pool: LayoutPool, plans: list[_Plan]) -> dict[Hashable, NodeTypeResult]:
    """One batched search per distinct node type, over every node count any of its offerings needs."""
    wanted: dict[Hashable, set[int]] = defaultdict(set)
    first: dict[Hashable, _Plan] = {}
    for plan in plans:
        if plan.counts:
            wanted[plan.key].update(plan.counts)
            first.setdefault(plan.key, plan)
    out = {}
    for key, counts in wanted.items():
        # The scale applies to this key alone: a calibrated offering is its own node type here.
        resolved = first[key].resolved
        with resolved.computing():
            out[key] = evaluate_node_type(pool, resolved.system, sorted(counts), resolved.tiers)
    return out


def _base_option(plan: _Plan) -> TrainOption:
    o = plan.offering
    notes = list(plan.notes)
    if o.price_per_hour is None:
        notes.append("price unknown")
    elif "price_per_hour" in o.unconfirmed:
        notes.append("price unconfirmed")
    return TrainOption(offering=o.id, provider=o.provider, gpu=o.system.node.gpu.id,
                       gpus_per_node=o.system.node.gpus, price_per_hour=o.price_per_hour,
                       price_unconfirmed="price_per_hour" in o.unconfirmed, measured_profile=plan.profile,
                       notes=notes, profile_notes=list(plan.notes))


def _candidate(plan: _Plan, nodes: int, prediction: TrainPrediction, request: TrainRequest) -> TrainOption:
    base = _base_option(plan)
    time_s = request.tokens / prediction.tokens_per_s
    price = plan.offering.price_per_hour
    system = plan.system.with_nodes(nodes)
    booked = plan.booking.booked_nodes(nodes)
    features = prediction.range_features
    time_range_s = list(time_range(time_s, "training", system, **features))
    evidence = spread("training", system, **features)
    unconfirmed_booking = nodes > 1 and plan.offering.multi_node is None
    idle = []
    if prediction.gpus < system.gpus:
        idle.append(f"{idle_gpus_note(system, prediction.gpus)}; the idle ones are paid for")
    booking = plan.booking.note(nodes)
    return replace(
        base, feasible=True, nodes=nodes, gpus=prediction.gpus, parallelism=prediction.parallelism,
        framework=prediction.framework, booked_nodes=booked,
        step_time_s=prediction.step_time_s, tokens_per_s=prediction.tokens_per_s, time_to_train_s=time_s,
        cost_usd=None if price is None else price * booked * time_s / 3600.0, time_to_train_s_range=time_range_s,
        cost_usd_range=None if price is None else [price * booked * t / 3600.0 for t in time_range_s],
        mfu=prediction.mfu, mfu_peak_tflops=prediction.mfu_peak_tflops, mfu_precision=prediction.mfu_precision,
        breakdown=prediction.breakdown, memory_gib_per_gpu=prediction.memory_gib_per_gpu,
        memory_gib_available=prediction.memory_gib_available,
        bottleneck=bottleneck_label(prediction.breakdown, prediction.step_time_s),
        bottleneck_detail=prediction.bottleneck,
        notes=[*base.notes, *([booking] if booking else []), *idle,
               *(["multi-node booking unconfirmed"] if unconfirmed_booking else []),
               *([evidence.note] if evidence.note else []), *prediction.physical_flags])


def _best(options: list[TrainOption], objective: Objective) -> TrainOption:
    """Best by the objective; under cost, near-ties (COST_TIE) go to the fastest."""
    priced = [o for o in options if o.cost_usd is not None]
    if objective is Objective.TIME or not priced:
        return min(options, key=lambda o: rank_key(Objective.TIME, o.time_to_train_s or 0.0, o.cost_usd))
    cheapest = min(o.cost_usd or 0.0 for o in priced)
    ties = [o for o in priced if (o.cost_usd or 0.0) <= cheapest * (1.0 + COST_TIE)]
    return min(ties, key=lambda o: o.time_to_train_s or 0.0)


def _held_to(option: TrainOption, limits: Limits) -> TrainOption:
    """The option, marked infeasible with the reasons when its p90 breaks the deadline or it breaks the budget."""
    misses = limits.misses(option.p90_time_s, option.cost_usd, option.time_to_train_s)
    return replace(option, feasible=False, reason="; ".join(misses)) if misses else option


def _choose(options: list[TrainOption], request: TrainRequest) -> TrainOption:
    """The best option within the limits, else the nearest miss (marked infeasible with its reasons)."""
    limits = request.limits
    within = [o for o in options if o.feasible]
    if within:
        return _best(within, request.objective)
    return min(options, key=lambda o: (limits.excess(o.p90_time_s, o.cost_usd),
                                       rank_key(request.objective, o.time_to_train_s or 0.0, o.cost_usd)))


def _no_fit(plan: _Plan, result: NodeTypeResult) -> TrainOption:
    option = _base_option(plan)
    needs = [(c.min_memory_gib, n) for n, c in result.counts.items()
             if n in plan.counts and c.min_memory_gib is not None]
    if not needs:
        return replace(option, reason="no valid layout at these GPU counts (the global batch or the model's heads "
                                      "and layers do not divide evenly)")
    memory, nodes = min(needs)
    usable = usable_memory_gib(plan.offering.system)
    return replace(option, memory_gib_per_gpu=memory, memory_gib_available=usable,
                   reason=f"does not fit in memory: needs {memory:.0f} GiB per GPU at best "
                          f"(at {nodes * option.gpus_per_node} GPUs), {usable:.0f} GiB usable")


def _candidates(plan: _Plan, results: dict[Hashable, NodeTypeResult], request: TrainRequest) -> list[TrainOption]:
    """One plan per node count at which a layout fits, each held to the deadline and budget."""
    if not plan.counts:
        return []
    result = results[plan.key]
    job = request.job()
    options = []
    for nodes in plan.counts:
        best = result.counts[nodes].best
        if best is not None and result.search is not None:
            system = plan.system.with_nodes(nodes)
            option = _candidate(plan, nodes, summarize(job, system, result.search, best), request)
            options.append(_held_to(option, request.limits))
    return options


def _row(plans: list[_Plan], results: dict[Hashable, NodeTypeResult], options: list[TrainOption],
         request: TrainRequest) -> TrainOption:
    """One offering's answer over every way it can be booked: the best option, else why none runs."""
    if options:
        return _choose(options, request)
    evaluated = [p for p in plans if p.counts]
    if not evaluated:
        return replace(_base_option(plans[0]), reason=plans[0].reason)
    return _no_fit(evaluated[0], results[evaluated[0].key])


def _frontier(plans: list[TrainOption]) -> list[TrainOption]:
    """Each offering's own frontier first (the node counts no other count of it beats), then the frontier of
    those across offerings, cheapest first, with its ends named."""
    by_offering: dict[str, list[TrainOption]] = defaultdict(list)
    for p in plans:
        if p.feasible:
            by_offering[p.offering].append(p)
    own = [p for options in by_offering.values() for p in pareto(options, _time, _cost)]
    front = pareto(sorted(own, key=lambda p: (p.offering, p.nodes or 0, p.booked_nodes or 0)), _time, _cost)
    return [replace(p, frontier=True, frontier_role=role) for p, role in zip(front, roles(len(front)))]


def _time(option: TrainOption) -> float | None:
    return option.time_to_train_s


def _cost(option: TrainOption) -> float | None:
    return option.cost_usd


def _mark(rows: list[TrainOption], frontier: list[TrainOption]) -> list[TrainOption]:
    """Rows whose plan (offering and node count) is on the frontier, marked as such."""
    on = {_plan_key(p): p.frontier_role for p in frontier}
    return [replace(r, frontier=True, frontier_role=on[_plan_key(r)])
            if r.feasible and _plan_key(r) in on else r for r in rows]


def _plan_key(option: TrainOption) -> tuple[str, int | None, int | None]:
    """A plan's identity: the offering, its node count and the nodes it books (whole domains or the nodes)."""
    return option.offering, option.nodes, option.booked_nodes


def _sort(rows: list[TrainOption], request: TrainRequest) -> list[TrainOption]:
    """Feasible by the objective; near misses by how far they miss; the rest by memory short, then name."""
    def objective_key(r: TrainOption) -> tuple[float, float, float]:
        return rank_key(request.objective, r.time_to_train_s or 0.0, r.cost_usd)

    feasible = sorted((r for r in rows if r.feasible), key=lambda r: (objective_key(r), r.offering))
    predicted = [r for r in rows if not r.feasible and r.time_to_train_s is not None]
    predicted.sort(key=lambda r: (request.limits.excess(r.p90_time_s, r.cost_usd), objective_key(r)))
    rest = [r for r in rows if not r.feasible and r.time_to_train_s is None]
    rest.sort(key=lambda r: (_memory_ratio(r), r.offering))
    return feasible + predicted + rest


def _memory_ratio(row: TrainOption) -> float:
    if row.memory_gib_per_gpu is None or not row.memory_gib_available:
        return float("inf")
    return row.memory_gib_per_gpu / row.memory_gib_available


def advise_train(request: TrainRequest, offerings: list[Offering]) -> TrainAdvice:
    """Rank `offerings` for the training job in `request`."""
    validate_train_request(request)
    pool = LayoutPool(request.job(), request.layout_request())
    per_offering = [_plans(o, request) for o in offerings]
    plans = [p for group in per_offering for p in group]
    results = _evaluate(pool, plans)
    by_plan = {id(plan): _candidates(plan, results, request) for plan in plans}
    candidates = list(by_plan.values())
    rows = [_row(group, results, [o for p in group for o in by_plan[id(p)]], request) for group in per_offering]
    enumerated = sum(c.enumerated for r in results.values() for c in r.counts.values())
    priced = sum(r.priced for r in results.values())
    every = [p for options in candidates for p in options]
    frontier = _frontier(every)
    return TrainAdvice(request, _mark(_sort(rows, request), frontier), enumerated, priced, every, frontier)


def winner_knob_effect(request: TrainRequest, option: TrainOption, offering: Offering) -> dict[str, Any] | None:
    """What the request's data-parallel knobs cost and save on a feasible option's layout (None without knobs)."""
    if not request.knobs.active or not option.feasible or option.parallelism is None:
        return None
    from linkscope.model.step.knob_effect import knob_effect

    resolved = resolve_offering(offering).with_nodes(option.nodes or 1)
    with resolved.computing():
        return knob_effect(request.job(), resolved.system, option.parallelism, resolved.tiers).as_dict()
