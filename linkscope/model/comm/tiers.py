"""A System's links as the collective model sees them: bandwidth and latency per tier, in NCCL's terms.

Bandwidths are what NCCL plans a channel set on (its topo.h constants), not datasheet rates: NVLink at the
share of the datasheet rate NCCL assumes per link, PCIe at width * speed / 80, NICs at the fabric's efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.comm.params import PROTOCOLS, FabricTraits, arch_key, comm_fit, fabric_traits, nccl_tuning

ArrayLike = np.ndarray | float | int


@dataclass(frozen=True)
class CommTiers:
    """Per-GPU, per-direction bandwidths (GB/s) and the facts that decide which algorithms exist."""

    system_id: str
    arch: str
    gpus_per_node: int
    """GPUs of one node as NCCL sees it: a node's, or a whole NVLink domain that spans nodes (GB200 NVL72: 72)."""
    scale_up_kind: str
    domain_size: int
    nvlink_bw_gb_per_s: float
    """NCCL-model per-GPU bandwidth into the scale-up domain (NVLink or bridge); 0 for PCIe-only nodes."""
    pcie_bw_gb_per_s: float
    inter_socket_bw_gb_per_s: float
    cpu_sockets: int
    nic_node_gb_per_s: float
    """All NICs of a node, after fabric efficiency and oversubscription; 0 without a fabric."""
    net_latency_us_extra: float
    fabric: str
    nvls: bool
    sharp: bool
    gdr: bool
    cpu: str
    net_simple_flush: bool = False
    """Simple pays the fabric's extra latency twice per NET hop (the receiver's flush; FabricTraits)."""
    protocols: tuple[str, ...] = PROTOCOLS
    """The protocols NCCL may use (NCCL_PROTO; a network plugin can set it, as aws-ofi-nccl sets `simple` on
    EFA platforms that cannot order 128-byte writes)."""
    net_protocols: tuple[str, ...] = PROTOCOLS
    """The protocols the fabric's standard setup lets NCCL run across nodes (FabricTraits.net_protocols)."""
    domain_spans_nodes: bool = False
    """The NVLink domain joins several hosts (NCCL's multi-node NVLink): a node here is a whole domain."""
    net_transport: str | None = None
    """The System's `scale_out.transport` (`srd`, `tcpx`, `proxy`...): how its RDMA is driven where the fabric's
    name does not say."""

    @property
    def node_word(self) -> str:
        """What a node of these tiers is, for messages: `node`, or `NVLink domain` where a domain spans hosts."""
        return "NVLink domain" if self.domain_spans_nodes else "node"

    @property
    def intra_hw(self) -> str:
        """NCCL's hardware class for intra-node hops: `nvlink` or `pci`."""
        return "nvlink" if self.nvlink_bw_gb_per_s > 0 else "pci"

    def intra_bw(self, ppn: ArrayLike) -> np.ndarray:
        """Per-GPU bandwidth for a collective over `ppn` GPUs of one node."""
        ppn = np.asarray(ppn, dtype=float)
        pcie = np.where(ppn > self.gpus_per_node / self.cpu_sockets,
                        min(self.pcie_bw_gb_per_s, self.inter_socket_bw_gb_per_s), self.pcie_bw_gb_per_s)
        if self.scale_up_kind in ("nvlink-mesh", "xgmi-mesh"):
            # A point-to-point mesh: a group of k GPUs reaches its k-1 peers over k-1 of the D-1 links.
            share = np.clip(ppn - 1, 1, self.domain_size - 1) / max(self.domain_size - 1, 1)
            return self.nvlink_bw_gb_per_s * share
        if self.scale_up_kind == "nvlink-bridge":
            return np.where(ppn <= self.domain_size, self.nvlink_bw_gb_per_s, pcie)
        if self.scale_up_kind == "nvswitch":
            return np.where(ppn <= self.domain_size, self.nvlink_bw_gb_per_s, pcie)
        return pcie

    def pair_bw(self) -> float:
        """Per-direction bandwidth between two GPUs of a node talking alone."""
        return float(self.intra_bw(2))

    def inter_bw(self, ppn: ArrayLike) -> np.ndarray:
        """NIC bandwidth behind `ppn` GPUs of a node, when the node's other GPUs use their own NICs at once."""
        ppn = np.asarray(ppn, dtype=float)
        return self.nic_node_gb_per_s * np.minimum(ppn, self.gpus_per_node) / self.gpus_per_node

    def net_overhead_us(self) -> float:
        """NCCL's per-CPU network overhead (before the Simple protocol's tripling)."""
        return nccl_tuning().net_overhead_us.get(self.cpu, nccl_tuning().net_overhead_us["other"])


def _nvlink_bw(system: System, arch: str) -> float:
    su = system.node.scale_up
    if su.kind == "pcie":
        return 0.0
    tuning = nccl_tuning()
    gpu_arch = system.node.gpu.arch
    if su.kind == "xgmi-mesh" and gpu_arch in tuning.xgmi_per_link_bw:
        return su.bw_gb_per_s * tuning.xgmi_per_link_bw[gpu_arch] / tuning.xgmi_datasheet_per_link_bw[gpu_arch]
    share = tuning.nvlink_per_link_bw[arch] / tuning.nvlink_datasheet_per_link_bw[arch]
    return su.bw_gb_per_s * share


def _fabric(system: System) -> FabricTraits | None:
    so = system.node.scale_out
    if so.fabric == "none":
        return None
    return fabric_traits()["tcpx" if so.transport in ("tcpx", "tcpxo") else so.fabric]


def _net_latency_us_extra(traits: FabricTraits | None) -> float:
    """The fabric's per-hop cost beyond InfiniBand: its data, or the collective fit's constant where the fit
    owns it (EFA: data/comm_fit.yaml, refitted in validate's folds)."""
    if traits is None:
        return 0.0
    if traits.latency_us_extra == "fitted":
        return comm_fit().efa_latency_us_extra
    return traits.latency_us_extra


def _nic_node_bw(system: System, traits: FabricTraits | None) -> float:
    """All NICs of one NCCL node (System.max_nccl_node_gpus): a node's, or every node's of an NVLink domain that
    spans nodes. Whole domains, however many of their GPUs a job uses: a group's own size sets its bandwidth
    (`intra_bw`, `inter_bw`), so the tiers of one node type do not depend on the node count."""
    so = system.node.scale_out
    if traits is None:
        return 0.0
    if so.nic_gbit_per_s is None:
        return float("nan")
    per_nic_gb_per_s = so.nic_gbit_per_s / 8.0 * traits.bw_efficiency
    if traits.max_gb_per_s_per_nic is not None:
        per_nic_gb_per_s = min(per_nic_gb_per_s, traits.max_gb_per_s_per_nic)
    nodes = system.max_nccl_node_gpus // system.node.gpus
    return nodes * so.nics * per_nic_gb_per_s / so.oversubscription


def comm_tiers(system: System) -> CommTiers:
    """Derive the collective model's view of a System (a GPU System: CPU hosts are measured, not modelled)."""
    if system.is_cpu_host:
        raise UserError(f"{system.id} has no GPU: measure it (`linkscope bench`), calibrate the run "
                        "(`linkscope calibrate RUN_ID`) and predict with --system profile:NAME")
    node = system.node
    arch = arch_key(node.gpu.arch)
    tuning = nccl_tuning()
    traits = _fabric(system)
    nic_bw = _nic_node_bw(system, traits)
    per_node = system.max_nccl_node_gpus
    cpu = node.cpu_vendor or "unknown"
    return CommTiers(
        system_id=system.id, arch=arch, gpus_per_node=per_node, scale_up_kind=node.scale_up.kind,
        domain_size=min(node.scale_up.domain_size, per_node), nvlink_bw_gb_per_s=_nvlink_bw(system, arch),
        pcie_bw_gb_per_s=tuning.pcie_x16_bw.get(node.host_pcie or node.gpu.pcie, tuning.pcie_x16_bw["pcie4"]),
        inter_socket_bw_gb_per_s=tuning.inter_socket_bw.get(cpu, tuning.inter_socket_bw["unknown"]),
        cpu_sockets=node.cpu_sockets, nic_node_gb_per_s=nic_bw,
        net_latency_us_extra=_net_latency_us_extra(traits),
        fabric=node.scale_out.fabric,
        nvls=node.scale_up.in_network_reduction == "nvls" and tuning.nvls_efficiency[arch] > 0,
        sharp=node.scale_out.sharp and node.scale_out.fabric == "infiniband",
        gdr=node.scale_out.gpudirect_rdma, cpu=cpu if cpu in ("intel", "amd") else "other",
        net_simple_flush=traits.simple_flush if traits else False,
        net_protocols=tuple(traits.net_protocols) if traits and traits.net_protocols else PROTOCOLS,
        domain_spans_nodes=system.domain_spans_nodes, net_transport=node.scale_out.transport,
    )


def check_multi_node(tiers: CommTiers, nodes: int) -> None:
    """A job across nodes needs a fabric with a known rate; say which is missing."""
    if nodes <= 1:
        return
    unit = f"{nodes} {tiers.node_word}s"
    if tiers.fabric == "none":
        raise UserError(f"{tiers.system_id} has no scale-out fabric, so it cannot span {unit}")
    if np.isnan(tiers.nic_node_gb_per_s):
        raise UserError(f"{tiers.system_id}: the NIC rate (scale_out.nic_gbit_per_s) is unknown, so a job across "
                        f"{unit} cannot be predicted; write a System file with the rate")
