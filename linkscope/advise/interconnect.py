"""What-if: the winner's GPUs, nodes and price, with another interconnect inside and between the nodes.

Inside the node: PCIe only, a point-to-point NVLink mesh (each GPU's NVLink split over its peers), NVSwitch.
Between nodes: InfiniBand, RoCE, EFA, TCP at the offering's own NIC count and line rate, so only the fabric
changes (its efficiency, latency and GPUDirect RDMA); where the offering has no known rate, one NIC per GPU at
the rate of its GPU generation stands in. The price is held constant, so cost moves only with time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from linkscope.advise.engine import LayoutPool, evaluate_node_type
from linkscope.advise.train import TrainOption, TrainRequest
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.hardware.system import NodeSpec, ScaleOut, ScaleUp, System
from linkscope.model.step.layout import Layout
from linkscope.model.step.predict import summarize
from linkscope.model.step.search import LayoutRequest
from linkscope.model.comm.tiers import comm_tiers

SCALE_UP_KINDS = ("pcie", "nvlink-mesh", "nvswitch")
FABRICS = ("infiniband", "roce", "efa", "tcp")


@dataclass
class Variant:
    """One interconnect and how the same job fares on it."""

    scale_up: str
    scale_out: str
    as_offered: bool
    step_time_s: float | None = None
    time_to_train_s: float | None = None
    cost_usd: float | None = None
    mfu: float | None = None
    parallelism: Layout | None = None
    time_change: float | None = None
    """Relative to the offering as offered: +0.25 = 25% longer (and, at a constant price, 25% dearer)."""
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.__dict__, "parallelism": self.parallelism.as_dict() if self.parallelism else None}


@dataclass
class InterconnectComparison:
    """The winner's job on every interconnect variant."""

    offering: str
    gpu: str
    nodes: int
    price_per_hour: float | None
    variants: list[Variant]
    notes: list[str]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**{k: v for k, v in self.__dict__.items() if k != "variants"},
                "variants": [v.as_dict() for v in self.variants]}


def _nvlink_bw_gb_per_s(node: NodeSpec, db: HardwareDB) -> float | None:
    """The GPU's own NVLink rate (per GPU, per direction), or None for a GPU without NVLink."""
    if node.scale_up.is_nvlink:
        return node.scale_up.bw_gb_per_s
    link = db.links.get(node.gpu.scale_up_link or "")
    return link.bw_gb_per_s if link is not None and link.family == "nvlink" else None


def scale_up_variant(node: NodeSpec, kind: str, db: HardwareDB) -> ScaleUp | None:
    """The node's scale-up domain rebuilt as `kind`; None when the GPU cannot have it (no NVLink, or an
    unknown PCIe generation)."""
    if kind == "pcie":
        pcie = db.links.get(node.host_pcie or node.gpu.pcie)
        if pcie is None or not pcie.bw_gb_per_s:
            return None
        return ScaleUp("pcie", pcie.id, pcie.bw_gb_per_s, node.gpus)
    if node.scale_up.kind == kind:
        return node.scale_up
    bw = _nvlink_bw_gb_per_s(node, db)
    if bw is None:
        return None
    generation = node.gpu.scale_up_link or node.scale_up.generation
    # NVLink SHARP comes with NVSwitch; the model enables it only on generations that have it.
    reduction = "nvls" if kind == "nvswitch" else "none"
    return ScaleUp(kind, generation, bw, node.gpus, in_network_reduction=reduction)  # type: ignore[arg-type]


def _generation_nic_gbit_per_s(node: NodeSpec) -> float:
    """A NIC rate typical of the GPU's generation: NDR 400 for Hopper and later, HDR 200 for Ampere."""
    capability = float(node.gpu.compute_capability or 0.0)
    return 400.0 if capability >= 9.0 else 200.0 if capability >= 8.0 else 100.0


def scale_out_variant(node: NodeSpec, fabric: str) -> ScaleOut:
    """The node's network as `fabric`, at the node's own NIC count and rate where known."""
    base = node.scale_out
    if base.fabric != "none" and base.nic_gbit_per_s:
        nics, rate = base.nics, base.nic_gbit_per_s
    else:
        nics, rate = node.gpus, _generation_nic_gbit_per_s(node)
    return ScaleOut(fabric, nics, rate, gpudirect_rdma=fabric != "tcp",  # type: ignore[arg-type]
                    oversubscription=base.oversubscription)


_NAMES = {"pcie": "PCIe", "nvlink-mesh": "NVLink mesh", "nvswitch": "NVSwitch", "nvlink-bridge": "NVLink bridge",
          "xgmi-mesh": "xGMI mesh", "infiniband": "IB", "roce": "RoCE", "efa": "EFA", "tcp": "TCP"}


def _label_up(scale_up: ScaleUp) -> str:
    return f"{_NAMES.get(scale_up.kind, scale_up.kind)} {scale_up.bw_gb_per_s:g} GB/s"


def _label_out(scale_out: ScaleOut) -> str:
    if scale_out.fabric == "none" or not scale_out.nic_gbit_per_s:
        return "none"
    return f"{_NAMES.get(scale_out.fabric, scale_out.fabric)} {scale_out.nics}x{scale_out.nic_gbit_per_s:g} Gbit/s"


def _run(pool: LayoutPool, request: TrainRequest, system: System, price: float | None) -> Variant:
    """The best layout of the job on `system` (all its nodes), priced at the offering's `price`."""
    node = system.node
    variant = Variant(scale_up=_label_up(node.scale_up), scale_out=_label_out(node.scale_out), as_offered=False)
    result = evaluate_node_type(pool, system.with_nodes(1), [system.nodes], comm_tiers(system))
    best = result.counts[system.nodes].best
    if best is None or result.search is None:
        variant.reason = "no layout fits in memory"
        return variant
    prediction = summarize(pool.job, system, result.search, best)
    variant.step_time_s, variant.mfu = prediction.step_time_s, prediction.mfu
    variant.parallelism = prediction.parallelism
    variant.time_to_train_s = request.tokens / prediction.tokens_per_s
    if price is not None:
        variant.cost_usd = price * system.nodes * variant.time_to_train_s / 3600.0
    return variant


def _variant_systems(system: System, db: HardwareDB) -> list[System]:
    """Every scale-up kind the GPU can have, crossed with every fabric when the job spans nodes."""
    node = system.node
    ups = [up for up in (scale_up_variant(node, kind, db) for kind in SCALE_UP_KINDS) if up is not None]
    outs = [scale_out_variant(node, fabric) for fabric in FABRICS] if system.nodes > 1 else [node.scale_out]
    return [replace(system, node=replace(node, scale_up=up, scale_out=out)) for up in ups for out in outs]


def compare_interconnect(request: TrainRequest, winner: TrainOption, offering: Offering,
                         db: HardwareDB) -> InterconnectComparison:
    """The winner's job (same GPUs, nodes and price) on PCIe / NVLink mesh / NVSwitch x IB / RoCE / EFA / TCP."""
    nodes = winner.nodes or 1
    system = offering.system.with_nodes(nodes)
    pool = LayoutPool(request.job(), LayoutRequest())
    price = offering.price_per_hour
    baseline = _run(pool, request, system, price)
    baseline.as_offered = True
    variants = [baseline] + [_run(pool, request, s, price) for s in _variant_systems(system, db)]
    for v in variants[1:]:
        if v.time_to_train_s is not None and baseline.time_to_train_s:
            v.time_change = v.time_to_train_s / baseline.time_to_train_s - 1.0
    notes = ["price held constant at the offering's price, so cost changes in step with time"]
    if nodes > 1:
        notes.append("variants between nodes keep the offering's NIC count and line rate; only the fabric "
                     "(efficiency, latency, GPUDirect RDMA) changes")
    else:
        notes.append("one node: the network between nodes plays no part")
    if winner.measured_profile:
        notes.append(f"the ranking used measured figures from profile {winner.measured_profile}; "
                     "this comparison uses the catalog figures throughout")
    return InterconnectComparison(offering.id, offering.system.node.gpu.id, nodes, price, variants, notes)
