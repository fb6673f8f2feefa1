"""Seed 001's question in one table: the same GPU and job on PCIe, an NVLink mesh, NVSwitch and (where the GPU's
family has one) a rack-scale NVLink domain, each with InfiniBand, RoCE, EFA and TCP between nodes when the job
spans nodes, with its time, tokens/s per GPU and cost.

Training keeps the GPU count of the plan it starts from. Each row is a plan `advise` itself ranked: the offering
of the same GPU with that interconnect that `advise` ranks first at that GPU count (same filters, same bookable
node counts), with its own time and cost. Where `advise` has no such plan the row says why, and shows the job's
time on the variant (its layout searched) with no price: an offering that cannot be booked for the job prices
nothing. `--price-per-gpu-hour` instead prices every variant, as a what-if, at that price. Serving searches the
layout and batch at the per-user budget on one node of each variant, exactly as `advise infer` does, each priced
as the closest real offering sells it (`price_basis`): a PCIe box is cheaper than an NVSwitch node, so holding
one price would only say that faster is cheaper.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.advise.engine import LayoutPool, evaluate_node_type
from linkscope.advise.infer import InferOption, InferRequest, serve
from linkscope.advise.price_basis import CLASS_NAMES, NO_PLAN, PriceBasis, closest_price, user_price
from linkscope.advise.objective import rank_key
from linkscope.advise.train import TrainAdvice, TrainOption, TrainRequest
from linkscope.advise.variants import Variant, as_offered, scale_up_class, variants
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.model.comm.params import fabric_traits
from linkscope.model.calibration.systems import ResolvedSystem, resolve_offering
from linkscope.model.step.infer import tp_options
from linkscope.model.step.layout import Layout
from linkscope.model.step.predict import summarize


@dataclass
class VariantResult:
    """One interconnect and how the same job fares on it (training fills the time fields, serving the rest)."""

    scale_up: str
    scale_out: str
    scale_up_class: str
    fabric: str
    as_offered: bool
    gpus: int
    price: PriceBasis
    parallelism: Layout | None = None
    step_time_s: float | None = None
    time_to_train_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    cost_usd: float | None = None
    mfu: float | None = None
    """Against `mfu_peak_tflops`, the dense peak of `mfu_precision` (model/ranges/mfu.py)."""
    mfu_peak_tflops: float | None = None
    mfu_precision: str | None = None
    tp: int | None = None
    pp: int | None = None
    batch: int | None = None
    tokens_per_s_per_user: float | None = None
    usd_per_million_tokens: float | None = None
    time_change: float | None = None
    """Training: relative to the plan as offered (+0.25 = 25% longer)."""
    reason: str | None = None
    """Why the row has no figures (nothing fits), or, for training, why no plan exists: then it shows the job's
    time on the what-if interconnect and no cost."""
    offering: str | None = None
    """Training: the offering whose plan (as `advise` ranked it) the row is; None for a what-if."""
    forced_tp: bool = False
    """Serving: the row holds TP at the smallest size that uses the interconnect (the free choice was tp 1)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.__dict__, "price": self.price.as_dict(),
                "parallelism": self.parallelism.as_dict() if self.parallelism else None}


@dataclass
class InterconnectComparison:
    """The job on every interconnect variant of one GPU, the first row as offered."""

    kind: str
    """`train` or `infer`."""
    offering: str
    gpu: str
    gpus: int
    variants: list[VariantResult]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**{k: v for k, v in self.__dict__.items() if k != "variants"},
                "variants": [v.as_dict() for v in self.variants]}


def _others(offered: Variant, candidates: list[Variant]) -> list[Variant]:
    """The variants other than the one the offering already is (its row stands for that class and fabric)."""
    return [v for v in candidates if (v.scale_up_class, v.fabric) != (offered.scale_up_class, offered.fabric)]


def _price(v: Variant, offering: Offering, db: HardwareDB, price_per_gpu_hour: float | None) -> PriceBasis:
    if price_per_gpu_hour is not None:
        return user_price(price_per_gpu_hour)
    if v.as_offered:
        return PriceBasis(offering.price_per_gpu_hour, offering.id, "as offered")
    return closest_price(v, offering, db)


def _result(v: Variant, price: PriceBasis) -> VariantResult:
    return VariantResult(v.scale_up_label, v.scale_out_label, v.scale_up_class, v.fabric, v.as_offered,
                         v.system.gpus, price)


def _train_one(pool: LayoutPool, request: TrainRequest, v: Variant, price: PriceBasis,
               resolved: ResolvedSystem) -> VariantResult:
    """The best layout of the job on the variant's System (all its nodes, as `resolved`), at its price."""
    system = resolved.system
    result = _result(v, price)
    with resolved.computing():
        counts = evaluate_node_type(pool, system.with_nodes(1), [system.nodes], resolved.tiers)
    best = counts.counts[system.nodes].best
    if best is None or counts.search is None:
        result.reason = "no layout fits in memory"
        return result
    with resolved.computing():
        prediction = summarize(pool.job, system, counts.search, best)
    result.step_time_s, result.mfu, result.parallelism = prediction.step_time_s, prediction.mfu, prediction.parallelism
    result.mfu_peak_tflops, result.mfu_precision = prediction.mfu_peak_tflops, prediction.mfu_precision
    result.time_to_train_s = request.tokens / prediction.tokens_per_s
    result.tokens_per_s_per_gpu = prediction.tokens_per_s / system.gpus
    if price.usd_per_gpu_hour is not None:
        result.cost_usd = price.usd_per_gpu_hour * system.gpus * result.time_to_train_s / 3600.0
    return result


def _notes(price_per_gpu_hour: float | None, spans_nodes: bool, training: bool = False) -> list[str]:
    if price_per_gpu_hour is not None:
        notes = [f"every variant at {price_per_gpu_hour:g} USD per GPU-hour (--price-per-gpu-hour)"]
    elif training:
        notes = ["each row is the plan advise ranks first for that interconnect (same GPU, same GPU count, the "
                 "filters given); where there is none the row says why and shows the job's time on the what-if "
                 "interconnect, with no price; --price-per-gpu-hour prices every variant at one price"]
    else:
        notes = ["each variant at the price per GPU-hour of the closest real offering (its id and how close it is "
                 "in JSON `price`); --price-per-gpu-hour sets one price for all"]
    if spans_nodes:
        cap = fabric_traits()["tcp"].max_gb_per_s_per_nic
        notes.append("between nodes each what-if keeps the node's NIC count and line rate; only the fabric "
                     f"changes. TCP is NCCL's socket transport, held to {cap:g} GB/s per NIC whatever its line rate "
                     "(public nccl-tests over 100 Gbit/s TCP, NVIDIA/nccl#450; the basis is in fabrics.yaml)")
    else:
        notes.append("one node: the network between nodes plays no part")
    return notes


def _kind(o: Offering | Variant) -> tuple[str, str]:
    """(scale-up class, fabric) of an offering or a variant."""
    node = o.system.node
    return scale_up_class(node.scale_up), node.scale_out.fabric


def _same_kind(o: Offering, v: Variant, spans: bool) -> bool:
    up, fabric = _kind(o)
    return up == v.scale_up_class and (fabric == v.fabric or not spans)


def _kind_text(v: Variant, spans: bool) -> str:
    """`NVSwitch and IB`, `PCIe`."""
    up = CLASS_NAMES.get(v.scale_up_class, v.scale_up_class)
    return f"{up} and {v.scale_out_label.split(' ')[0]}" if spans else up


def _advised(advice: TrainAdvice, first: TrainOption, v: Variant, db: HardwareDB) -> tuple[TrainOption | None, str]:
    """The plan advise ranks first among those of the first plan's GPU and GPU count on the variant's kind of
    interconnect (within the limits before those beyond them), or why there is none."""
    spans = (first.nodes or 1) > 1
    kind = [r for r in advice.rows if r.gpu == first.gpu and _same_kind(db.offerings[r.offering], v, spans)]
    plans = [p for p in advice.plans if p.gpu == first.gpu and p.gpus == first.gpus
             and _same_kind(db.offerings[p.offering], v, spans)]
    if plans:
        objective, limits = advice.request.objective, advice.request.limits
        best = min(plans, key=lambda p: (not p.feasible, limits.excess(p.p90_time_s, p.cost_usd),
                                         rank_key(objective, p.time_to_train_s or 0.0, p.cost_usd), p.offering))
        return best, ""
    what = f"{first.gpu} with {_kind_text(v, spans)}"
    if not any(r.gpu == first.gpu and _kind(db.offerings[r.offering])[0] == v.scale_up_class for r in advice.rows):
        return None, f"no {first.gpu} with {_kind_text(v, False)} among the offerings searched"
    if not kind:
        return None, f"no {what} among the offerings searched"
    o = kind[0]
    why = o.reason or f"no plan at {first.gpus} GPUs"
    more = f" (and {len(kind) - 1} more)" if len(kind) > 1 else ""
    return None, f"no bookable {what} at {first.gpus} GPUs: {o.offering}{more}: {why}"


def _from_plan(option: TrainOption, db: HardwareDB) -> VariantResult:
    """A row that is one of advise's own plans, with its figures."""
    offering = db.offerings[option.offering]
    system = offering.system.with_nodes(option.nodes or 1)
    v = Variant(system, *_kind(offering))
    match = "its own plan" + (f" ({option.reason})" if option.reason else "")
    result = _result(v, PriceBasis(offering.price_per_gpu_hour, offering.id, match))
    result.gpus, result.offering, result.parallelism = option.gpus or system.gpus, option.offering, option.parallelism
    result.step_time_s, result.mfu, result.time_to_train_s = option.step_time_s, option.mfu, option.time_to_train_s
    result.mfu_peak_tflops, result.mfu_precision = option.mfu_peak_tflops, option.mfu_precision
    result.tokens_per_s_per_gpu = (option.tokens_per_s or 0.0) / result.gpus
    result.cost_usd = option.cost_usd
    return result


def compare_train(request: TrainRequest, plan: TrainOption, offering: Offering, db: HardwareDB,
                  price_per_gpu_hour: float | None = None, advice: TrainAdvice | None = None
                  ) -> InterconnectComparison:
    """The plan's job (same GPUs) on PCIe / NVLink mesh / NVSwitch / rack-scale x IB / RoCE / EFA / TCP: each row
    the plan `advice` ranks first on that interconnect, or, where it has none (or without `advice`), the job on
    the what-if interconnect, unpriced unless `price_per_gpu_hour` is given. The first row is the plan itself."""
    resolved = resolve_offering(offering).with_nodes(plan.nodes or 1)
    system = resolved.system
    pool = LayoutPool(request.job(), request.layout_request())
    spans = system.nodes > 1
    offered = as_offered(system)
    results = [_from_plan(plan, db) if price_per_gpu_hour is None else
               _train_one(pool, request, offered, user_price(price_per_gpu_hour), resolved)]
    results[0].as_offered = True
    for v in _others(offered, variants(system, db, fabrics=spans)):
        found, why = _advised(advice, plan, v, db) if advice is not None else (None, "no ranking to take it from")
        if found is not None and price_per_gpu_hour is None:
            results.append(_from_plan(found, db))
            continue
        price = user_price(price_per_gpu_hour) if price_per_gpu_hour is not None else PriceBasis(None, NO_PLAN, why)
        row = _train_one(pool, request, v, price, ResolvedSystem.plain(v.system))
        if price_per_gpu_hour is None and row.reason is None:
            row.cost_usd = None
        results.append(row)
    base = results[0].time_to_train_s
    for r in results[1:]:
        if r.time_to_train_s is not None and base:
            r.time_change = r.time_to_train_s / base - 1.0
    notes = _notes(price_per_gpu_hour, spans, training=True)
    if plan.measured_profile:
        notes.append(f"the ranking used measured figures from profile {plan.measured_profile}; "
                     "the what-if rows use the catalog figures")
    return InterconnectComparison("train", offering.id, system.node.gpu.id, system.gpus, results, notes)


def _serve_one(request: InferRequest, v: Variant, offering: Offering, price: PriceBasis) -> VariantResult:
    """`advise infer`'s answer on one node of the variant, at its price."""
    node_price = None if price.usd_per_gpu_hour is None else price.usd_per_gpu_hour * v.system.node.gpus
    # The offering itself as offered (a profile of it then counts, as in `advise infer`); a what-if as the catalog
    # would describe it, bookable across nodes.
    what_if = offering if v.as_offered and price.source == offering.id else replace(
        offering, id=f"{offering.id} ({v.scale_up_label})", system=v.system.with_nodes(1), price_per_hour=node_price,
        unconfirmed=(), multi_node=offering.multi_node if v.as_offered else True)
    option = serve(what_if, request)
    result = _result(v, price)
    result.gpus = option.gpus_per_replica or 0
    _copy_serving(result, option)
    return result


def _copy_serving(result: VariantResult, option: InferOption) -> None:
    if not option.feasible:
        result.reason = option.reason
        return
    result.tp, result.pp, result.batch = option.tp, option.pp, option.batch
    result.tokens_per_s_per_user = option.tokens_per_s_per_user
    result.tokens_per_s_per_gpu = option.tokens_per_s_per_gpu
    result.usd_per_million_tokens = option.usd_per_million_tokens


def _serve_all(request: InferRequest, offering: Offering, db: HardwareDB,
               price_per_gpu_hour: float | None) -> tuple[list[VariantResult], bool]:
    """Every variant's answer (a variant whose layout spans nodes also over every fabric), and whether any did."""
    node_system = offering.system.with_nodes(1)
    offered = as_offered(node_system)
    results, spans = [], False
    for v in [offered, *_others(offered, variants(node_system, db, fabrics=False, keep_gpus=False))]:
        first = _serve_one(request, v, offering, _price(v, offering, db, price_per_gpu_hour))
        results.append(first)
        if (first.pp or 1) > 1 and not v.as_offered:
            spans = True
            results += [_serve_one(request, f, offering, _price(f, offering, db, price_per_gpu_hour))
                        for f in _fabric_variants(v, db) if f.fabric != v.fabric]
    return results, spans


def compare_infer(request: InferRequest, offering: Offering, db: HardwareDB,
                  price_per_gpu_hour: float | None = None) -> InterconnectComparison:
    """The serving job on one node of every scale-up variant of the offering's GPU, with the layout and batch
    `advise infer` would choose on each. Where every variant chooses tp 1, no traffic crosses the interconnect,
    so the rows are repeated at the smallest TP above 1 that the node and model allow: the comparison the seed
    makes."""
    results, spans = _serve_all(request, offering, db, price_per_gpu_hour)
    notes = _notes(price_per_gpu_hour, spans)
    if not spans:
        notes[-1] = "each layout fits in one node, so the network between nodes plays no part"
    wider = [t for t in tp_options(request.model, offering.system.max_nccl_node_gpus) if t > 1]
    if request.tp is None and wider and all(r.tp == 1 for r in results if r.tp is not None):
        forced, _ = _serve_all(replace(request, tp=wider[0]), offering, db, price_per_gpu_hour)
        for r in forced:
            r.forced_tp = True
        results += forced
        notes.append(f"every variant's own choice is tp 1 (the model fits one GPU at this budget), where no traffic "
                     f"crosses the interconnect; the rows below it hold tp {wider[0]}")
    return InterconnectComparison("infer", offering.id, offering.system.node.gpu.id, offering.system.node.gpus,
                                  results, notes)


def _fabric_variants(v: Variant, db: HardwareDB) -> list[Variant]:
    """The variant's node with each fabric between nodes."""
    return [w for w in variants(v.system, db, fabrics=True, keep_gpus=False) if w.scale_up_class == v.scale_up_class]
