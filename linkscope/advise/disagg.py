"""`advise infer --disaggregated`: prefill and decode pools searched on every offering, beside colocated serving.

Per offering (node types shared by several offerings are searched once): every prefill TP and decode TP inside a
node, whole nodes (1, 2 and 4 where clusters can be booked), the decode batch on the ladder below the per-user
budget's, and every prefill:decode ratio that fills the nodes. A plan's throughput is rate matching
(`model.step.disagg`): for fixed TPs and batch it is min(prefill instances x their rate, KV links, decode replicas
x theirs), so every ratio is priced from the parts at once and only the best ones have their TTFT worked out (at
the default load, `load_share` of their capacity). A plan must meet the per-user speed and, when given, the TTFT
budget. Cost counts every GPU of the nodes rented: $/Mtok = price per GPU-hour / (tokens/s per GPU x 3600) x 1e6.

Colocated serving on the same offering is `advise infer`'s own answer (its layout and batch at the budget), with
its TTFT at its own default load; the offering's verdict is whichever is cheaper per token. The frontier spans both
kinds across offerings, by time per output token and $/Mtok.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from linkscope.advise.bookable import multi_node_block
from linkscope.advise.frontier import pareto, roles
from linkscope.advise.infer import InferRequest, serve, validate_infer_request
from linkscope.hardware.errors import UserError
from linkscope.hardware.offering import Offering
from linkscope.hardware.system import System
from linkscope.model.calibration.systems import ResolvedSystem, resolve_offering
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step.disagg import (DecodePrice, DisaggEstimate, DisaggJob, Pool, PrefillPrice, assemble,
                                         colocated_of, decode_estimate, decode_price, place, prefill_price,
                                         transfer_for)
from linkscope.model.step.compute import PRECISIONS
from linkscope.model.step.infer import InferJob, estimate_inference, tp_options
from linkscope.model.step.kv_transfer import KvOptions, KvTransfer, check_options, kv_constants

NODE_COUNTS = (1, 2, 4)
MAX_TRIED_RATIOS = 4
"""Per TP pair, node count and batch, the best ratios by throughput whose TTFT is worked out (the rest are
beaten by them unless the TTFT budget rules them out)."""


@dataclass(frozen=True)
class DisaggRequest:
    """`advise infer --disaggregated`: the serving job, a TTFT budget, and how the KV cache is paged and sent."""

    base: InferRequest
    ttft_budget_s: float | None = None
    kv: KvOptions = field(default_factory=KvOptions)
    kv_precision: str = "bf16"
    node_counts: tuple[int, ...] = NODE_COUNTS


@dataclass
class Plan:
    """One way to serve the job on one offering: disaggregated (pools, KV path) or colocated."""

    offering: str
    provider: str
    gpu: str
    kind: str
    nodes: int
    gpus: int
    layout: str
    ttft_s: float
    tpot_s: float
    tokens_per_s_per_gpu: float
    price_per_gpu_hour: float | None
    kv_path: str | None = None
    bottleneck: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    frontier_role: str | None = None

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Price per GPU-hour over the GPUs' output tokens per hour, per million."""
        if self.price_per_gpu_hour is None or self.tokens_per_s_per_gpu <= 0:
            return None
        return self.price_per_gpu_hour / (self.tokens_per_s_per_gpu * 3600.0) * 1e6

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; `tokens_per_s_per_user` x `tpot_s` = 1."""
        return {**{k: v for k, v in self.__dict__.items()}, "tokens_per_s_per_user": 1.0 / self.tpot_s,
                "usd_per_million_tokens": self.usd_per_million_tokens}


@dataclass
class OfferingAnswer:
    """One offering: its cheapest disaggregated plan, its colocated plan, and which wins (or why neither)."""

    offering: str
    disaggregated: Plan | None
    colocated: Plan | None
    reason: str | None = None

    @property
    def winner(self) -> str | None:
        """`disaggregated` or `colocated`, whichever costs less per token (more tokens/s per GPU unpriced)."""
        plans = [p for p in (self.disaggregated, self.colocated) if p is not None]
        if not plans:
            return None
        return min(plans, key=lambda p: (p.usd_per_million_tokens or math.inf, -p.tokens_per_s_per_gpu)).kind

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"offering": self.offering, "winner": self.winner, "reason": self.reason,
                "disaggregated": self.disaggregated.as_dict() if self.disaggregated else None,
                "colocated": self.colocated.as_dict() if self.colocated else None}


@dataclass
class DisaggAdvice:
    """Every offering's answer, the frontier across them, and the fastest TTFT seen when no plan meets the
    budget."""

    request: DisaggRequest
    answers: list[OfferingAnswer]
    frontier: list[Plan]
    fastest: Plan | None = None

    @property
    def no_plan(self) -> str | None:
        """`no plan meets TTFT ...: the fastest gives ...` when the TTFT budget ruled every plan out."""
        budget = self.request.ttft_budget_s
        if budget is None or any(a.disaggregated or a.colocated for a in self.answers):
            return None
        if self.fastest is None:
            return f"no plan meets TTFT {budget:g} s: no offering serves the job at the per-user budget"
        f = self.fastest
        return (f"no plan meets TTFT {budget:g} s: the fastest gives {f.ttft_s:.3g} s ({f.offering}, {f.kind}, "
                f"{f.layout})")


def validate_disagg_request(request: DisaggRequest) -> None:
    """The serving job's checks, a positive TTFT budget, and KV options within the context."""
    validate_infer_request(request.base)
    if request.ttft_budget_s is not None and not (math.isfinite(request.ttft_budget_s)
                                                  and request.ttft_budget_s > 0):
        raise UserError(f"must be a positive number of seconds (got {request.ttft_budget_s})", field="ttft_budget")
    check_options(request.kv, request.base.input_tokens + request.base.output_tokens)
    if request.kv_precision not in PRECISIONS:
        raise UserError(f"unknown format '{request.kv_precision}' (choose from {', '.join(PRECISIONS)})",
                        field="kv_precision")


def _job(request: DisaggRequest, n_p: int, tp_p: int, n_d: int, tp_d: int) -> DisaggJob:
    b = request.base
    return DisaggJob(b.model, b.input_tokens, b.output_tokens, Pool(n_p * tp_p, tp_p), Pool(n_d * tp_d, tp_d),
                     precision=b.precision, kv_precision=request.kv_precision, engine=b.engine, kv=request.kv)


def _ladder(pick: int) -> list[int]:
    out, i = [], pick
    while i > 0:
        out.append(i)
        i = (i + 1) // 2 - 1
    return out + [0]


@dataclass(frozen=True)
class _Parts:
    """A node type's per-TP prices: prefill instances, decode replicas on their batch ladder."""

    prefill: dict[int, PrefillPrice]
    decode: dict[int, list[DecodePrice]]


def _parts(request: DisaggRequest, system: System, tiers: CommTiers) -> _Parts:
    b = request.base
    tps = [t for t in tp_options(b.model, system.node.gpus) if b.tp is None or t == b.tp]
    prefill, decode = {}, {}
    for tp in tps:
        job = _job(request, 1, tp, 1, tp)
        try:
            prefill[tp] = prefill_price(job, system, tiers)
            est, pick = decode_estimate(job, system, tiers, None, b.tokens_per_s_per_user)
        except UserError:
            continue
        if pick is not None:
            decode[tp] = [decode_price(est, i) for i in _ladder(pick)]
    return _Parts({t: p for t, p in prefill.items() if p.fits}, decode)


@dataclass
class _Search:
    """What a node type's search keeps: feasible plans (unpriced) and the fastest TTFT of any plan tried."""

    plans: list[tuple[DisaggEstimate, float]] = field(default_factory=list)
    """(plan, its TTFT at the default load)."""
    fastest: tuple[DisaggEstimate, float] | None = None

    def saw(self, plan: DisaggEstimate, ttft_s: float, budget: float | None) -> None:
        if self.fastest is None or ttft_s < self.fastest[1]:
            self.fastest = (plan, ttft_s)
        if budget is None or ttft_s <= budget:
            self.plans.append((plan, ttft_s))


def _ratios(tp_p: int, tp_d: int, total: int) -> list[tuple[int, int]]:
    """(prefill instances, decode replicas) that fill `total` GPUs (with fewer than one instance left over)."""
    out = []
    for n_p in range(1, total // tp_p):
        n_d = (total - n_p * tp_p) // tp_d
        if n_d >= 1:
            out.append((n_p, n_d))
    return out


def _search_node_type(request: DisaggRequest, system1: System, tiers: CommTiers, counts: tuple[int, ...]) -> _Search:
    parts = _parts(request, system1, tiers)
    search = _Search()
    transfers: dict[tuple[int, int, str, int], KvTransfer] = {}
    load = kv_constants().load_share
    for nodes in counts:
        system = system1.with_nodes(nodes)
        for tp_p, pre in parts.prefill.items():
            for tp_d, ladder in parts.decode.items():
                for dec in ladder:
                    _try_ratios(request, system, tiers, (tp_p, pre), (tp_d, dec), transfers, search, load)
    return search


def _try_ratios(request: DisaggRequest, system: System, tiers: CommTiers, prefill: tuple[int, PrefillPrice],
                decode: tuple[int, DecodePrice], transfers: dict[tuple[int, int, str, int], KvTransfer],
                search: _Search, load: float) -> None:
    """The ratios of one TP pair and batch, best throughput first, until one meets the TTFT budget."""
    (tp_p, pre), (tp_d, dec) = prefill, decode
    plans = []
    for n_p, n_d in _ratios(tp_p, tp_d, system.gpus):
        job = _job(request, n_p, tp_p, n_d, tp_d)
        try:
            placement = place(job, system)
            key = (tp_p, tp_d, placement.path, min(job.prefill.gpus, system.node.gpus))
            if key not in transfers:
                transfers[key] = transfer_for(job, system, tiers, placement)
        except UserError:
            continue
        plans.append(assemble(job, placement, pre, dec, transfers[key]))
    plans.sort(key=lambda p: -p.tokens_per_s_per_gpu)
    for plan in plans[:MAX_TRIED_RATIOS]:
        ttft = plan.ttft(load * plan.rate_per_s).total_s
        search.saw(plan, ttft, request.ttft_budget_s)
        if request.ttft_budget_s is None or ttft <= request.ttft_budget_s:
            return


def _layout(plan: DisaggEstimate) -> str:
    p, d = plan.job.prefill, plan.job.decode
    return f"P{p.instances}xtp{p.tp} D{d.replicas}xtp{d.tp} b{plan.batch}"


def _disagg_plan(offering: Offering, plan: DisaggEstimate, ttft_s: float, nodes_gpus: int) -> Plan:
    job = plan.job
    # Every GPU of the nodes rented is paid for, whether a pool uses it or not.
    per_gpu = plan.rate_per_s * job.output_tokens / nodes_gpus
    details = {"prefill_instances": job.prefill.instances, "prefill_tp": job.prefill.tp,
               "decode_replicas": job.decode.replicas, "decode_tp": job.decode.tp, "decode_batch": plan.batch,
               "kv_transfer_s": plan.kv_exposed_s, "kv_bytes_per_request": plan.transfer.bytes_per_request,
               "capacity_requests_per_s": plan.capacity_per_s}
    return Plan(offering.id, offering.provider, offering.system.node.gpu.id, "disaggregated",
                nodes_gpus // offering.system.node.gpus, nodes_gpus, _layout(plan), ttft_s, plan.tpot_s, per_gpu,
                offering.price_per_gpu_hour, plan.placement.path, plan.bottleneck, details)


def _colocated_plan(offering: Offering, resolved: ResolvedSystem, request: DisaggRequest) -> Plan | None:
    """`advise infer`'s answer on the offering, with its TTFT at its default load."""
    option = serve(offering, request.base)
    if not option.feasible or option.tp is None or option.batch is None:
        return None
    b = request.base
    job = InferJob(b.model, option.tp, option.pp or 1, b.input_tokens, b.output_tokens, b.precision,
                   ep=option.ep or 1, engine=b.engine)
    gpus = option.gpus_per_replica or option.tp
    system = resolved.system.with_nodes(max(1, math.ceil(gpus / offering.system.node.gpus)))
    est = estimate_inference(job, system, np.asarray([float(option.batch)]), resolved.tiers)
    beside = colocated_of(job, est, 0, gpus)
    ttft = beside.ttft(kv_constants().load_share * beside.rate_per_s).total_s
    layout = f"tp{option.tp}" + (f" pp{option.pp}" if (option.pp or 1) > 1 else "") + f" b{option.batch}"
    return Plan(offering.id, offering.provider, offering.system.node.gpu.id, "colocated", system.nodes, gpus, layout,
                ttft, beside.tpot_s, option.tokens_per_s_per_gpu or beside.tokens_per_s_per_gpu,
                offering.price_per_gpu_hour)


def _node_counts(offering: Offering, tiers: CommTiers, counts: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in counts if multi_node_block(offering, tiers, n) is None)


def answer_offering(offering: Offering, request: DisaggRequest,
                    cache: dict[Any, _Search]) -> tuple[OfferingAnswer, list[Plan], Plan | None]:
    """The offering's cheapest disaggregated plan, its colocated plan, every feasible plan, the fastest TTFT."""
    resolved = resolve_offering(offering)
    if request.base.precision == "fp8" and offering.system.node.gpu.fp8_dense_tflops is None:
        reason = f"no FP8 tensor cores on {offering.system.node.gpu.id}"
        return OfferingAnswer(offering.id, None, None, reason), [], None
    counts = _node_counts(offering, resolved.tiers, request.node_counts)
    key = (offering.system.node, resolved.tiers, counts)
    if key not in cache:
        cache[key] = _search_node_type(request, resolved.system.with_nodes(1), resolved.tiers, counts)
    search = cache[key]
    g = offering.system.node.gpus
    plans = [_disagg_plan(offering, p, t, p.job.gpus + (-p.job.gpus) % g) for p, t in search.plans]
    fastest = _disagg_plan(offering, *search.fastest, search.fastest[0].job.gpus) if search.fastest else None
    colo = _colocated_plan(offering, resolved, request)
    if colo is not None and (request.ttft_budget_s is None or colo.ttft_s <= request.ttft_budget_s):
        plans.append(colo)
    elif colo is not None and (fastest is None or colo.ttft_s < fastest.ttft_s):
        fastest = colo
    disagg = min((p for p in plans if p.kind == "disaggregated"), default=None, key=_cost_key)
    colocated = next((p for p in plans if p.kind == "colocated"), None)
    why = None if disagg or colocated else _why_not(request, search, colo)
    return OfferingAnswer(offering.id, disagg, colocated, why), plans, fastest


def _cost_key(plan: Plan) -> tuple[float, float]:
    return (plan.usd_per_million_tokens or math.inf, -plan.tokens_per_s_per_gpu)


def _why_not(request: DisaggRequest, search: _Search, colo: Plan | None) -> str:
    if search.fastest is None and colo is None:
        return f"no layout gives {request.base.tokens_per_s_per_user:g} tokens/s per user"
    return f"no plan meets TTFT {request.ttft_budget_s:g} s"


def advise_disagg(request: DisaggRequest, offerings: list[Offering]) -> DisaggAdvice:
    """Every offering's answer (those with a plan first, cheapest first) and the frontier across offerings."""
    validate_disagg_request(request)
    cache: dict[Any, _Search] = {}
    answers, points, fastest = [], [], None
    for offering in offerings:
        answer, plans, quickest = answer_offering(offering, request, cache)
        answers.append(answer)
        points += plans
        if quickest is not None and (fastest is None or quickest.ttft_s < fastest.ttft_s):
            fastest = quickest
    front = pareto(sorted(points, key=lambda p: (p.offering, p.kind)), lambda p: p.tpot_s,
                   lambda p: p.usd_per_million_tokens)
    for plan, role in zip(front, roles(len(front))):
        plan.frontier_role = role
    answers.sort(key=lambda a: (a.winner is None, min(_cost_key(p) for p in (a.disaggregated, a.colocated)
                                                      if p is not None) if a.winner else (math.inf, 0.0),
                                a.offering))
    return DisaggAdvice(request, answers, front, fastest)
