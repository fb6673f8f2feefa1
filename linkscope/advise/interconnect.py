"""Seed 001's question in one table: the same GPU and job on PCIe, an NVLink mesh, NVSwitch and (where the GPU's
family has one) a rack-scale NVLink domain, each with InfiniBand, RoCE, EFA and TCP between nodes when the job
spans nodes, with its time, tokens/s per GPU and cost.

Each variant is priced as the closest real offering sells it (`price_basis`), or at `--price-per-gpu-hour`:
a PCIe box is cheaper than an NVSwitch node, so holding one price would only say that faster is cheaper.
Training keeps the GPU count of the plan it starts from and searches the layout on each variant; serving
searches the layout and batch at the per-user budget on one node of each, exactly as `advise infer` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.advise.engine import LayoutPool, evaluate_node_type
from linkscope.advise.infer import InferOption, InferRequest, serve
from linkscope.advise.price_basis import PriceBasis, closest_price, user_price
from linkscope.advise.train import TrainOption, TrainRequest
from linkscope.advise.variants import Variant, as_offered, variants
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
    tp: int | None = None
    pp: int | None = None
    batch: int | None = None
    tokens_per_s_per_user: float | None = None
    usd_per_million_tokens: float | None = None
    time_change: float | None = None
    """Training: relative to the plan as offered (+0.25 = 25% longer)."""
    reason: str | None = None
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
    result.time_to_train_s = request.tokens / prediction.tokens_per_s
    result.tokens_per_s_per_gpu = prediction.tokens_per_s / system.gpus
    if price.usd_per_gpu_hour is not None:
        result.cost_usd = price.usd_per_gpu_hour * system.gpus * result.time_to_train_s / 3600.0
    return result


def _notes(price_per_gpu_hour: float | None, spans_nodes: bool) -> list[str]:
    notes = [f"every variant at {price_per_gpu_hour:g} USD per GPU-hour (--price-per-gpu-hour)"
             if price_per_gpu_hour is not None else
             "each variant at the price per GPU-hour of the closest real offering (its id and how close it is "
             "in JSON `price`); --price-per-gpu-hour sets one price for all"]
    if spans_nodes:
        cap = fabric_traits()["tcp"].max_gb_per_s_per_nic
        notes.append("between nodes each variant keeps the node's NIC count and line rate; only the fabric changes. "
                     f"TCP is NCCL's socket transport, held to {cap:g} GB/s per NIC whatever its line rate (public "
                     "nccl-tests over 100 Gbit/s TCP, NVIDIA/nccl#450; the basis is in fabrics.yaml)")
    else:
        notes.append("one node: the network between nodes plays no part")
    return notes


def compare_train(request: TrainRequest, plan: TrainOption, offering: Offering, db: HardwareDB,
                  price_per_gpu_hour: float | None = None) -> InterconnectComparison:
    """The plan's job (same GPUs) on PCIe / NVLink mesh / NVSwitch / rack-scale x IB / RoCE / EFA / TCP. The row
    as offered is the offering as `advise` resolved it (a profile's measured figures included), so it repeats the
    plan's numbers; the variants are catalog figures."""
    resolved = resolve_offering(offering).with_nodes(plan.nodes or 1)
    system = resolved.system
    pool = LayoutPool(request.job(), request.layout_request())
    spans = system.nodes > 1
    offered = as_offered(system)
    results = [_train_one(pool, request, offered, _price(offered, offering, db, price_per_gpu_hour), resolved)]
    for v in _others(offered, variants(system, db, fabrics=spans)):
        price = _price(v, offering, db, price_per_gpu_hour)
        results.append(_train_one(pool, request, v, price, ResolvedSystem.plain(v.system)))
    base = results[0].time_to_train_s
    for r in results[1:]:
        if r.time_to_train_s is not None and base:
            r.time_change = r.time_to_train_s / base - 1.0
    notes = _notes(price_per_gpu_hour, spans)
    if plan.measured_profile:
        notes.append(f"the ranking used measured figures from profile {plan.measured_profile}; "
                     "this comparison uses the catalog figures throughout")
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
