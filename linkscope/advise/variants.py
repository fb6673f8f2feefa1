"""What-if Systems: one node type rebuilt with another interconnect inside the node and between nodes.

Inside the node: PCIe only, a point-to-point NVLink mesh (each GPU's NVLink split over its peers), NVSwitch, and,
where the GPU's family is sold in one, a rack-scale NVSwitch domain (NVL72: 72 GPUs in one NVLink domain).
Between nodes: InfiniBand, RoCE, EFA, TCP at the node's own NIC count and line rate, so only the fabric changes
(its efficiency, latency, GPUDirect RDMA; plain TCP runs on NCCL's socket transport, whose ceiling `fabrics.yaml`
sets); where the node has no known rate, one NIC per GPU at the rate of its GPU generation stands in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.system import Fabric, InNetworkReduction, NodeSpec, ScaleOut, ScaleUp, ScaleUpKind, System

SCALE_UP_KINDS: tuple[ScaleUpKind, ...] = ("pcie", "nvlink-mesh", "nvswitch")
RACK = "rack"
"""The scale-up class of an NVSwitch domain wider than a server (GB200 NVL72)."""
SERVER_GPUS = 8
"""The most GPUs one server's NVSwitch joins; a wider NVSwitch domain is rack-scale."""
FABRICS: tuple[Fabric, ...] = ("infiniband", "roce", "efa", "tcp")


def scale_up_class(scale_up: ScaleUp) -> str:
    """`pcie`, `nvlink-mesh`, `nvswitch`, `rack` (an NVSwitch domain wider than a server), or the kind itself
    (`nvlink-bridge`, `xgmi-mesh`)."""
    if scale_up.kind == "nvswitch" and scale_up.domain_size > SERVER_GPUS:
        return RACK
    return scale_up.kind


@dataclass(frozen=True)
class Variant:
    """One interconnect for the job: the System, its scale-up class and fabric, and labels for a table."""

    system: System
    scale_up_class: str
    fabric: str
    as_offered: bool = False

    @property
    def scale_up_label(self) -> str:
        """GB/s per GPU each way: `NVSwitch 450`, `NVLink mesh 64/pair` (a pair's share of the mesh),
        `NVSwitch x72 900` (a rack-scale domain of 72), `PCIe 63`."""
        su = self.system.node.scale_up
        name = _NAMES.get(su.kind, su.kind)
        if su.is_mesh and su.domain_size > 1:
            return f"{name} {su.pair_bw_gb_per_s():.0f}/pair"
        if self.scale_up_class == RACK:
            return f"{name} x{su.domain_size} {su.bw_gb_per_s:g}"
        return f"{name} {su.bw_gb_per_s:g}"

    @property
    def scale_out_label(self) -> str:
        """`IB 8x400G` (NICs x Gbit/s each), or `none`."""
        so = self.system.node.scale_out
        if so.fabric == "none" or not so.nic_gbit_per_s:
            return "none"
        return f"{_NAMES.get(so.fabric, so.fabric)} {so.nics}x{so.nic_gbit_per_s:g}G"


_NAMES = {"pcie": "PCIe", "nvlink-mesh": "NVLink mesh", "nvswitch": "NVSwitch", "nvlink-bridge": "NVLink bridge",
          "xgmi-mesh": "xGMI mesh", "infiniband": "IB", "roce": "RoCE", "efa": "EFA", "tcp": "TCP"}


def _nvlink_bw_gb_per_s(node: NodeSpec, db: HardwareDB) -> float | None:
    """The GPU's own NVLink rate (per GPU, per direction), or None for a GPU without NVLink."""
    if node.scale_up.is_nvlink:
        return node.scale_up.bw_gb_per_s
    link = db.links.get(node.gpu.scale_up_link or "")
    return link.bw_gb_per_s if link is not None and link.family == "nvlink" else None


def scale_up_variant(node: NodeSpec, kind: ScaleUpKind, db: HardwareDB) -> ScaleUp | None:
    """The node's scale-up domain rebuilt as `kind`; None when the GPU cannot have it (no NVLink, or an
    unknown PCIe generation)."""
    if kind == "pcie":
        pcie = db.links.get(node.host_pcie or node.gpu.pcie)
        if pcie is None or not pcie.bw_gb_per_s:
            return None
        return ScaleUp("pcie", pcie.id, pcie.bw_gb_per_s, node.gpus)
    if node.scale_up.kind == kind and node.scale_up.domain_size <= node.gpus:
        return node.scale_up
    bw = _nvlink_bw_gb_per_s(node, db)
    if bw is None:
        return None
    generation = node.gpu.scale_up_link or node.scale_up.generation
    # NVLink SHARP comes with NVSwitch; the model enables it only on generations that have it.
    reduction: InNetworkReduction = "nvls" if kind == "nvswitch" else "none"
    return ScaleUp(kind, generation, bw, node.gpus, in_network_reduction=reduction)


def rack_domain(node: NodeSpec, db: HardwareDB) -> ScaleUp | None:
    """The widest rack-scale NVSwitch domain any System or offering of the GPU's family is sold in (GB200 NVL72
    for B200), or None when the family has none."""
    family = node.gpu.family_name
    systems = [*db.systems.values(), *(o.system for o in db.offerings.values())]
    racks = [s.node.scale_up for s in systems
             if s.node.gpu.family_name == family and scale_up_class(s.node.scale_up) == RACK]
    return max(racks, key=lambda su: (su.domain_size, su.bw_gb_per_s), default=None)


def _generation_nic_gbit_per_s(node: NodeSpec) -> float:
    """A NIC rate typical of the GPU's generation: NDR 400 for Hopper and later, HDR 200 for Ampere."""
    capability = float(node.gpu.compute_capability or 0.0)
    return 400.0 if capability >= 9.0 else 200.0 if capability >= 8.0 else 100.0


def scale_out_variant(node: NodeSpec, fabric: Fabric) -> ScaleOut:
    """The node's network as `fabric`, at the node's own NIC count and rate where known."""
    base = node.scale_out
    if base.fabric != "none" and base.nic_gbit_per_s:
        nics, rate = base.nics, base.nic_gbit_per_s
    else:
        nics, rate = node.gpus, _generation_nic_gbit_per_s(node)
    return ScaleOut(fabric, nics, rate, gpudirect_rdma=fabric != "tcp",
                    oversubscription=base.oversubscription)


def _resized(node: NodeSpec, gpus: int, scale_up: ScaleUp) -> NodeSpec:
    """`gpus` of the node's GPU joined by `scale_up`, with as many NICs per GPU as the node has."""
    so = node.scale_out
    nics = max(1, round(so.nics * gpus / node.gpus)) if so.fabric != "none" else 0
    return replace(node, gpus=gpus, scale_up=replace(scale_up, domain_size=min(scale_up.domain_size, gpus)),
                   scale_out=replace(so, nics=nics))


def _largest_divisor(total: int, at_most: int) -> int:
    return max(d for d in range(1, min(total, at_most) + 1) if total % d == 0)


def _scale_ups(system: System, db: HardwareDB, keep_gpus: bool) -> list[tuple[str, NodeSpec]]:
    """(class, node) for every scale-up class the GPU can have. A server holds at most SERVER_GPUS GPUs and a rack
    its domain; with `keep_gpus` both divide the System's GPUs, so every variant has as many GPUs as it."""
    node = system.node
    total = system.gpus if keep_gpus else max(node.gpus, SERVER_GPUS)
    server_gpus = _largest_divisor(total, SERVER_GPUS) if keep_gpus or node.gpus > SERVER_GPUS else node.gpus
    server = node if server_gpus == node.gpus else _resized(node, server_gpus, node.scale_up)
    out: list[tuple[str, NodeSpec]] = []
    for kind in SCALE_UP_KINDS:
        up = scale_up_variant(server, kind, db)
        if up is not None:
            out.append((kind, replace(server, scale_up=up)))
    rack = rack_domain(node, db)
    if rack is not None:
        rack_gpus = _largest_divisor(total, rack.domain_size) if keep_gpus else rack.domain_size
        out.append((RACK, _resized(node, rack_gpus, rack)))
    return out


def variants(system: System, db: HardwareDB, fabrics: bool, keep_gpus: bool = True) -> list[Variant]:
    """Every scale-up class the GPU can have (a rack-scale domain where its family has one), each with every
    fabric when `fabrics` (the job spans nodes), else with the node's own network. With `keep_gpus` (training:
    the same GPUs) every variant has `system.gpus` GPUs; without (serving: one node), a rack variant is a rack."""
    out = []
    for kind, node in _scale_ups(system, db, keep_gpus):
        nodes = max(system.gpus // node.gpus, 1) if keep_gpus else 1
        outs = [scale_out_variant(node, f) for f in FABRICS] if fabrics else [node.scale_out]
        for so in outs:
            sized = replace(system, node=replace(node, scale_out=so), nodes=nodes)
            out.append(Variant(sized, kind, so.fabric))
    return out


def as_offered(system: System) -> Variant:
    """The System itself, as a variant."""
    return Variant(system, scale_up_class(system.node.scale_up), system.node.scale_out.fabric, as_offered=True)
