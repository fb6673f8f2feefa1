"""The System: a node type times a node count and a scale-out fabric. Every prediction takes one.

A System comes from a preset or catalog offering (what is promised), from the probe of a live machine
(what is there) or from a calibration (what it actually does), so the three can always be compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date
from typing import Literal

from linkscope.hardware.specs import GpuSpec

ScaleUpKind = Literal["nvswitch", "nvlink-mesh", "nvlink-bridge", "xgmi-mesh", "pcie", "host"]
"""`host`: a machine without GPUs, whose ranks are processes sharing the host's memory."""
Fabric = Literal["infiniband", "roce", "efa", "tcp", "none"]
InNetworkReduction = Literal["none", "nvls"]
Origin = Literal["preset", "offering", "file", "probe", "profile"]

SCALE_UP_KINDS: tuple[str, ...] = ("nvswitch", "nvlink-mesh", "nvlink-bridge", "xgmi-mesh", "pcie", "host")
FABRICS: tuple[str, ...] = ("infiniband", "roce", "efa", "tcp", "none")
RDMA_FABRICS: frozenset[str] = frozenset({"infiniband", "roce", "efa"})


@dataclass(frozen=True)
class ScaleUp:
    """The GPU-to-GPU domain inside a node (or a rack, for NVL72).

    `bw_gb_per_s` is each GPU's bandwidth into the domain, per direction. In a point-to-point mesh
    that total is split over the peers; through NVSwitch any pair gets all of it.
    """

    kind: ScaleUpKind
    generation: str
    bw_gb_per_s: float
    domain_size: int
    in_network_reduction: InNetworkReduction = "none"
    links_per_gpu: int | None = None

    @property
    def is_nvlink(self) -> bool:
        """True for any NVLink-family domain (switch, mesh or bridge)."""
        return self.kind.startswith("nvlink") or self.kind == "nvswitch"

    @property
    def is_mesh(self) -> bool:
        """A point-to-point mesh: each GPU's bandwidth is divided among its direct peers."""
        return self.kind in ("nvlink-mesh", "xgmi-mesh")

    def pair_bw_gb_per_s(self) -> float:
        """Per-direction bandwidth between two GPUs of the domain when only that pair talks."""
        if self.is_mesh and self.domain_size > 1:
            return self.bw_gb_per_s / (self.domain_size - 1)
        return self.bw_gb_per_s


@dataclass(frozen=True)
class ScaleOut:
    """The fabric between nodes. `nic_gbit_per_s` is per NIC per direction; None when unknown."""

    fabric: Fabric
    nics: int
    nic_gbit_per_s: float | None
    gpudirect_rdma: bool = False
    sharp: bool = False
    oversubscription: float = 1.0
    generation: str | None = None
    transport: str | None = None
    """Extra detail where the fabric name is not enough: `srd` (EFA), `tcpx`, `tcpxo` (GCP)."""

    @property
    def total_gbit_per_s(self) -> float | None:
        """All scale-out NICs of one node together, per direction."""
        if self.fabric == "none" or self.nics == 0:
            return 0.0
        if self.nic_gbit_per_s is None:
            return None
        return self.nics * self.nic_gbit_per_s

    @property
    def is_rdma(self) -> bool:
        """GPUDirect RDMA over an RDMA-capable fabric (InfiniBand, RoCE or EFA)."""
        return self.fabric in RDMA_FABRICS and self.gpudirect_rdma


NO_SCALE_OUT = ScaleOut(fabric="none", nics=0, nic_gbit_per_s=None)


@dataclass(frozen=True)
class NodeSpec:
    """One node type: which GPU, how many, how they are joined, and how the node reaches others."""

    gpu: GpuSpec
    gpus: int
    scale_up: ScaleUp
    scale_out: ScaleOut = NO_SCALE_OUT
    host_pcie: str | None = None
    cpu_vendor: str | None = None
    cpu_sockets: int = 2

    def scale_out_gb_per_s_per_gpu(self) -> float | None:
        """The node's scale-out bandwidth shared evenly by its GPUs, per direction, in GB/s."""
        total = self.scale_out.total_gbit_per_s
        if total is None:
            return None
        return total / 8.0 / self.gpus / self.scale_out.oversubscription


@dataclass(frozen=True)
class System:
    """A node type times a node count. The one noun every prediction and comparison takes."""

    id: str
    node: NodeSpec
    nodes: int = 1
    name: str = ""
    description: str = ""
    origin: Origin = "preset"
    source: str = ""
    as_of: date | None = None
    max_nodes: int | None = None
    """Largest bookable cluster, where the provider limits it (1 = single node only)."""
    notes: tuple[str, ...] = field(default=())

    @property
    def is_cpu_host(self) -> bool:
        """A machine without GPUs (its device is the CPU): measured and calibrated, never modelled."""
        return self.node.gpu.vendor == "cpu"

    @property
    def gpus(self) -> int:
        """All GPUs of the System."""
        return self.node.gpus * self.nodes

    @property
    def gpus_per_node(self) -> int:
        """GPUs in one node."""
        return self.node.gpus

    def with_nodes(self, nodes: int) -> System:
        """The same node type at another node count."""
        if nodes < 1:
            raise ValueError(f"node count must be at least 1, got {nodes}")
        return replace(self, nodes=nodes)

    def with_gpus(self, gpus: int) -> System:
        """Enough nodes of this type for `gpus` GPUs; `gpus` must fill whole nodes beyond the first."""
        per_node = self.node.gpus
        if gpus <= per_node:
            return replace(self, nodes=1, node=replace(self.node, gpus=gpus)) if gpus < per_node else self.with_nodes(1)
        if gpus % per_node:
            raise ValueError(f"{gpus} GPUs do not fill whole nodes of {per_node} GPUs on {self.id}")
        return self.with_nodes(gpus // per_node)
