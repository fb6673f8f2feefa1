"""`advise infer`: serving one model on every offering at a per-user speed budget, as a time–cost frontier or
ranked by dollars per million output tokens (or by per-user speed).

Per offering: tensor parallelism inside one node (every TP that divides the node's GPUs and the model's
heads), and pipeline stages across nodes only when the weights fit nowhere in one node. For each layout the
largest batch that still gives every user the budgeted tokens/s; the layout with the most tokens/s per GPU
wins, since the price per GPU-hour is the same for all of them. $/Mtok = price per GPU-hour /
(tokens/s per GPU x 3600) x 1e6. With a request rate, replicas = ceil(QPS x output tokens / replica tokens/s).

A smaller batch (or a wider TP) buys each user more speed at a higher price per token. The frontier is the plans
(offering, layout, batch) that no other beats on both the time per output token and $/Mtok, from the cheapest at
the budget to the fastest any offering serves; batches are tried on a ladder of powers of two below the budget's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any


from linkscope.advise.bookable import multi_node_block
from linkscope.advise.booking import NODES, Booking, serving_booking
from linkscope.advise.frontier import pareto, roles
from linkscope.advise.objective import Objective
from linkscope.hardware.errors import UserError
from linkscope.hardware.offering import Offering
from linkscope.hardware.system import System
from linkscope.model.comm.moe import transport_problem
from linkscope.model.ranges.accuracy import rate_range, spread
from linkscope.model.step.compute import DEFAULT_ENGINE, ENGINES, PRECISIONS
from linkscope.model.step.infer import (InferEstimate, InferJob, best_batch_for_budget, candidate_batches,
                                        estimate_inference, tp_options)
from linkscope.model.step.search import divisors
from linkscope.model.calibration.systems import ResolvedSystem, resolve_offering
from linkscope.model.step.transformer import ModelConfig

MAX_PIPELINE_NODES = 8


@dataclass(frozen=True)
class InferRequest:
    """One serving job: the model, the per-user speed budget, prompt and answer lengths, optional load."""

    model: ModelConfig
    tokens_per_s_per_user: float
    input_tokens: int = 2048
    output_tokens: int = 512
    qps: float | None = None
    precision: str = "bf16"
    objective: Objective = Objective.COST
    """Each offering's row: its cheapest plan at the budget (cost) or its fastest (time)."""
    tp: int | None = None
    """Serve at this tensor-parallel size only; None tries every size inside a node."""
    engine: str = DEFAULT_ENGINE
    """The serving engine's host loop (model/step/compute.py, ENGINES)."""
    moe_transport: str = "auto"
    """How wide EP's dispatch and combine reach other GPUs (model/comm/moe.py TRANSPORT_CHOICES)."""


def validate_infer_request(request: InferRequest) -> None:
    """Reject values that make no sense, naming the flag."""
    if not request.tokens_per_s_per_user > 0:
        raise UserError(f"must be positive tokens/s per user (got {request.tokens_per_s_per_user})",
                        field="latency_budget")
    for name, tokens in (("input_tokens", request.input_tokens), ("output_tokens", request.output_tokens)):
        if tokens < 1:
            raise UserError(f"must be at least 1 (got {tokens})", field=name)
    if request.qps is not None and not request.qps > 0:
        raise UserError(f"must be positive (got {request.qps})", field="qps")
    if request.precision not in PRECISIONS:
        raise UserError(f"unknown format '{request.precision}' (choose from {', '.join(PRECISIONS)})",
                        field="precision")
    if request.engine not in ENGINES:
        raise UserError(f"unknown engine '{request.engine}' (choose from {', '.join(ENGINES)})", field="engine")


@dataclass
class InferOption:
    """One offering's best serving layout at the budget, or why there is none."""

    offering: str
    provider: str
    gpu: str
    gpus_per_node: int
    price_per_gpu_hour: float | None
    feasible: bool = False
    reason: str | None = None
    tp: int | None = None
    pp: int | None = None
    ep: int | None = None
    """Wide expert parallelism of an MoE model (experts over ep GPUs, attention data-parallel); 1 or None: none."""
    gpus_per_replica: int | None = None
    batch: int | None = None
    tokens_per_s_per_user: float | None = None
    tokens_per_s_per_gpu: float | None = None
    tokens_per_s_per_gpu_range: list[float] | None = None
    """p10..p90 from the inference predictions' leave-one-source-out errors; ranking uses the central value."""
    usd_per_million_tokens: float | None = None
    usd_per_million_tokens_range: list[float] | None = None
    memory_gib_per_gpu: float | None = None
    tp_allreduce_share_decode: float | None = None
    replicas: int | None = None
    nodes_needed: int | None = None
    fleet_usd_per_hour: float | None = None
    notes: list[str] = field(default_factory=list)
    frontier: bool = False
    """This plan (offering, layout and batch) is on the time–cost frontier across every offering."""
    frontier_role: str | None = None
    """On the frontier: `cheapest` and `fastest` at its two ends, `between` for the points between; None off it."""

    @property
    def time_per_output_token_s(self) -> float | None:
        """What each user waits per token with other users' prefills (the same estimate as `predict infer`): one
        over the per-user speed."""
        return 1.0 / self.tokens_per_s_per_user if self.tokens_per_s_per_user else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; `tpot_s` x `tokens_per_s_per_user` = 1, as in `predict infer`."""
        return {**self.__dict__, "tpot_s": self.time_per_output_token_s}


@dataclass
class InferAdvice:
    """Every offering's row (feasible ones by the objective, then the near misses) and the frontier's plans."""

    request: InferRequest
    rows: list[InferOption]
    frontier: list[InferOption]


def _layouts(system: System, model: ModelConfig, tp: int | None = None) -> list[tuple[int, int]]:
    """(tp, pp): every TP inside one node or NVLink domain (or `tp` alone), then the widest TP with pipeline
    stages over 2, 4, 8 of them."""
    per_node = system.max_nccl_node_gpus
    tps = [t for t in tp_options(model, per_node) if tp is None or t == tp]
    if not tps:
        return []
    widest = max(tps)
    # Stages over whole nodes only: a node is the unit rented, and TP stays inside it.
    pps = [p for p in (2, 4, MAX_PIPELINE_NODES) if p <= model.layers and widest == per_node]
    return [(t, 1) for t in tps] + [(widest, p) for p in pps]


@dataclass
class _Try:
    tp: int
    pp: int
    est: InferEstimate
    pick: int | None
    ep: int = 1


def _ep_sizes(system: System, model: ModelConfig) -> list[int]:
    """Wide-EP sizes tried for an MoE model: the largest that divides the experts inside one node or NVLink
    domain (a whole NVL72 rack), then 2, 4 and 8 of them."""
    if not model.is_moe:
        return []
    per_node = system.max_nccl_node_gpus
    inside = [d for d in divisors(model.experts) if 1 < d <= per_node]
    across = [per_node * n for n in (2, 4, MAX_PIPELINE_NODES) if model.experts % (per_node * n) == 0]
    return inside[-1:] + across


def _try_ep(offering: Offering, resolved: ResolvedSystem, request: InferRequest, ep: int) -> _Try | str:
    """Price wide EP over `ep` GPUs (attention tp 1 per GPU), or say why it cannot be booked."""
    nodes = math.ceil(ep / resolved.system.node.gpus)
    block = multi_node_block(offering, resolved.tiers, nodes, resolved.system)
    if block is not None:
        return block
    problem = transport_problem(resolved.tiers, "low-latency", request.moe_transport, nodes)
    if problem is not None:
        return problem
    job = InferJob(request.model, 1, 1, request.input_tokens, request.output_tokens, request.precision, ep=ep,
                   engine=request.engine, moe_transport=request.moe_transport)
    system = resolved.system.with_nodes(nodes)
    est = estimate_inference(job, system, candidate_batches(job, system), resolved.tiers)
    return _Try(1, 1, est, best_batch_for_budget(est, request.tokens_per_s_per_user), ep)


def _try(offering: Offering, resolved: ResolvedSystem, request: InferRequest, tp: int, pp: int) -> _Try | str:
    """Price one layout over every batch size, or say why it cannot be booked."""
    nodes = math.ceil(tp * pp / resolved.system.node.gpus)
    block = multi_node_block(offering, resolved.tiers, nodes, resolved.system)
    if block is not None:
        return block
    job = InferJob(request.model, tp, pp, request.input_tokens, request.output_tokens, request.precision,
                   engine=request.engine)
    system = resolved.system.with_nodes(nodes)
    est = estimate_inference(job, system, candidate_batches(job, system), resolved.tiers)
    return _Try(tp, pp, est, best_batch_for_budget(est, request.tokens_per_s_per_user))


def _tries(offering: Offering, resolved: ResolvedSystem, request: InferRequest) -> tuple[list[_Try], list[str]]:
    """Single-node layouts; pipeline stages across nodes only when no single node holds the model."""
    tries: list[_Try] = []
    blocks: list[str] = []
    for tp, pp in _layouts(resolved.system, request.model, request.tp):
        if pp > 1 and any(bool(t.est.fits[0]) for t in tries):
            break
        result = _try(offering, resolved, request, tp, pp)
        if isinstance(result, str):
            blocks.append(result)
        else:
            tries.append(result)
    for ep in _ep_sizes(resolved.system, request.model) if request.tp in (None, 1) else []:
        wide = _try_ep(offering, resolved, request, ep)
        if not isinstance(wide, str):
            tries.append(wide)
    return tries, blocks


def _base(offering: Offering, resolved: ResolvedSystem) -> InferOption:
    o = offering
    option = InferOption(offering=o.id, provider=o.provider, gpu=o.system.node.gpu.id,
                         gpus_per_node=o.system.node.gpus, price_per_gpu_hour=o.price_per_gpu_hour)
    if o.price_per_hour is None:
        option.notes.append("price unknown")
    option.notes.extend(resolved.notes)
    return option


def _fill(option: InferOption, best: _Try, request: InferRequest, offering: Offering,
          index: int | None = None) -> InferOption:
    """`option` as the plan of layout `best` at batch index `index` (default: the budget's pick)."""
    i = index if index is not None else best.pick if best.pick is not None else 0
    est = best.est
    option.feasible = True
    option.tp, option.pp, option.ep = best.tp, best.pp, best.ep
    option.gpus_per_replica = best.ep if best.ep > 1 else best.tp * best.pp
    option.batch = int(est.batch[i])
    option.tokens_per_s_per_user = float(est.tokens_per_s_per_user[i])
    option.tokens_per_s_per_gpu = float(est.tokens_per_s_per_gpu[i])
    option.memory_gib_per_gpu = float(est.memory_gib_per_gpu[i])
    option.tp_allreduce_share_decode = float(est.tp_comm_decode_s[i] / est.decode_step_s[i])
    system = offering.system.with_nodes(math.ceil(best.tp * best.pp / offering.system.node.gpus))
    features: dict[str, Any] = {"precision": request.precision, "framework": request.engine,
                                "gpus": best.tp * best.pp}
    option.tokens_per_s_per_gpu_range = list(rate_range(option.tokens_per_s_per_gpu, "inference", system,
                                                        **features))
    evidence = spread("inference", system, **features)
    if evidence.note and evidence.note not in option.notes:
        option.notes.append(evidence.note)
    if option.price_per_gpu_hour is not None:
        option.usd_per_million_tokens = option.price_per_gpu_hour / (option.tokens_per_s_per_gpu * 3600.0) * 1e6
        option.usd_per_million_tokens_range = [option.price_per_gpu_hour / (rate * 3600.0) * 1e6
                                               for rate in option.tokens_per_s_per_gpu_range[::-1]]
    if request.qps is not None:
        replica_tokens_per_s = option.tokens_per_s_per_gpu * option.gpus_per_replica
        option.replicas = math.ceil(request.qps * request.output_tokens / replica_tokens_per_s)
        needed = math.ceil(option.replicas * option.gpus_per_replica / option.gpus_per_node)
        option.nodes_needed = serving_booking(offering).fleet_nodes(needed)
        if offering.price_per_hour is not None:
            option.fleet_usd_per_hour = option.nodes_needed * offering.price_per_hour
    return option


def _why_not(option: InferOption, tries: list[_Try], blocks: list[str], request: InferRequest) -> str:
    """The reason in words; a layout that fits but is too slow leaves its best speed on `option` (closest first)."""
    fitting = [t for t in tries if bool(t.est.fits[0])]
    if fitting:
        fastest = max(fitting, key=lambda t: float(t.est.tokens_per_s_per_user[0]))
        speed = float(fastest.est.tokens_per_s_per_user[0])
        option.tp, option.pp, option.batch, option.tokens_per_s_per_user = fastest.tp, fastest.pp, 1, speed
        return f"too slow for {request.tokens_per_s_per_user:g} tokens/s per user: at most {speed:.0f} " \
               f"(batch 1, tp {fastest.tp}, pp {fastest.pp})"
    if blocks:
        return f"the model needs more than one node; {blocks[0]}"
    if not tries and request.tp is not None:
        return f"tp {request.tp} does not fit a node of {option.gpus_per_node} GPUs or divide {request.model.id}'s " \
               "heads"
    if not tries:
        return f"no tensor-parallel size divides both the node's GPUs and {request.model.id}'s heads"
    least = min(tries, key=lambda t: float(t.est.memory_gib_per_gpu[0]))
    return f"does not fit in memory: {float(least.est.memory_gib_per_gpu[0]):.0f} GiB per GPU at batch 1 " \
           f"(tp {least.tp}, pp {least.pp})"


@dataclass(frozen=True)
class _Point:
    """One plan of one offering: a layout at one batch index, with what the frontier compares."""

    offering: Offering
    resolved: ResolvedSystem
    tried: _Try
    index: int
    time_per_token_s: float
    usd_per_million_tokens: float | None


def _ladder(pick: int) -> list[int]:
    """Batch indices from the budget's pick down to batch 1 by halving: the speeds a smaller batch buys."""
    out, i = [], pick
    while i > 0:
        out.append(i)
        i = (i + 1) // 2 - 1
    return out + [0]


def _points(offering: Offering, resolved: ResolvedSystem, good: list[_Try], budget: float) -> list[_Point]:
    """Every layout's plans on the batch ladder that fit and meet the budget."""
    price = offering.price_per_gpu_hour
    points = []
    for t in good:
        for i in _ladder(t.pick or 0):
            speed = float(t.est.tokens_per_s_per_user[i])
            if not (bool(t.est.fits[i]) and speed >= budget):
                continue
            per_gpu = float(t.est.tokens_per_s_per_gpu[i])
            cost = None if price is None or per_gpu <= 0 else price / (per_gpu * 3600.0) * 1e6
            points.append(_Point(offering, resolved, t, i, 1.0 / speed, cost))
    return points


def _option(offering: Offering, request: InferRequest) -> tuple[InferOption, list[_Point]]:
    """The offering's row by the objective, and its own frontier (the plans no other plan of it beats)."""
    resolved = resolve_offering(offering)
    booking = serving_booking(offering)
    if booking.system is not offering.system:
        resolved = replace(ResolvedSystem.plain(booking.system), spec=offering.id)
    option = _base(offering, resolved)
    if booking.kind:
        option.notes.append(_serving_note(booking))
    if request.precision == "fp8" and offering.system.node.gpu.fp8_dense_tflops is None:
        option.reason = f"no FP8 tensor cores on {option.gpu}"
        return option, []
    tries, blocks = _tries(offering, resolved, request)
    good = [t for t in tries if t.pick is not None]
    if not good:
        option.reason = _why_not(option, tries, blocks, request)
        return option, []
    points = _points(offering, resolved, good, request.tokens_per_s_per_user)
    own = pareto(points, lambda p: p.time_per_token_s, lambda p: p.usd_per_million_tokens)
    if request.objective is Objective.TIME:
        fastest = min(points, key=lambda p: (p.time_per_token_s, p.usd_per_million_tokens or math.inf))
        return _fill(option, fastest.tried, request, offering, fastest.index), own
    best = max(good, key=lambda t: (float(t.est.tokens_per_s_per_gpu[t.pick or 0]), -t.tp * t.pp))
    return _fill(option, best, request, offering), own


def _serving_note(booking: Booking) -> str:
    """How the fleet books an offering whose NVLink domain spans nodes."""
    s = booking.system
    if booking.kind == NODES:
        return booking.note(1) or ""
    return (f"books whole {s.nvlink_domain_gpus}-GPU NVLink domains ({s.nodes_per_domain} nodes) so that a replica "
            f"may span nodes over NVLink" + ("" if booking.confirmed else " (unconfirmed that it can)"))


def serve(offering: Offering, request: InferRequest) -> InferOption:
    """One offering's row of `advise infer` by cost: its layout and batch with the most tokens/s per GPU at the
    budget, or why there is none."""
    return _option(offering, replace(request, objective=Objective.COST))[0]


def _sort_key(option: InferOption, objective: Objective) -> tuple[float, float, str]:
    cost = option.usd_per_million_tokens
    cost_key = math.inf if cost is None else cost
    if objective is Objective.TIME:
        return (-(option.tokens_per_s_per_user or 0.0), cost_key, option.offering)
    return (cost_key, -(option.tokens_per_s_per_gpu or 0.0), option.offering)


def _frontier(points: list[_Point], request: InferRequest) -> list[InferOption]:
    """The plans across offerings that none beats on both time per token and $/Mtok, cheapest first."""
    front = pareto(sorted(points, key=lambda p: p.offering.id), lambda p: p.time_per_token_s,
                   lambda p: p.usd_per_million_tokens)
    out = []
    for point, role in zip(front, roles(len(front))):
        option = _fill(_base(point.offering, point.resolved), point.tried, request, point.offering, point.index)
        option.frontier, option.frontier_role = True, role
        out.append(option)
    return out


def plan_infer(request: InferRequest, offerings: list[Offering]) -> InferAdvice:
    """Every offering's serving option (feasible ones by the objective, unknown prices after, then the near
    misses) and the time–cost frontier across offerings."""
    validate_infer_request(request)
    answers = [_option(o, request) for o in offerings]
    options = [a[0] for a in answers]
    frontier = _frontier([p for a in answers for p in a[1]], request)
    on = {(p.offering, p.tp, p.pp, p.ep, p.batch): p.frontier_role for p in frontier}
    for o in options:
        key = (o.offering, o.tp, o.pp, o.ep, o.batch)
        if o.feasible and key in on:
            o.frontier, o.frontier_role = True, on[key]
    feasible = sorted((o for o in options if o.feasible), key=lambda o: _sort_key(o, request.objective))
    # The nearest misses first: the fastest of those too slow for the budget, then the rest by name.
    rest = sorted((o for o in options if not o.feasible),
                  key=lambda o: (-(o.tokens_per_s_per_user or 0.0), o.offering))
    return InferAdvice(request, feasible + rest, frontier)


def advise_infer(request: InferRequest, offerings: list[Offering]) -> list[InferOption]:
    """Every offering's serving option: feasible ones by the objective ($/Mtok by default; unknown prices after),
    then the near misses."""
    return plan_infer(request, offerings).rows
