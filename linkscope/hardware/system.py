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

    @property
    def domain_spans_nodes(self) -> bool:
        """Whether the NVLink domain joins several nodes: NVSwitch trays of a GB200/GB300 NVL72 rack, each a node
        with its own OS and NICs, whose GPUs reach the other trays' over NVLink (NCCL's multi-node NVLink)."""
        return self.scale_up.kind == "nvswitch" and self.scale_up.domain_size > self.gpus

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
        """GPUs in one node (a compute tray of an NVL72 rack: 4)."""
        return self.node.gpus

    @property
    def domain_spans_nodes(self) -> bool:
        """Whether the NVLink domain joins several nodes (NodeSpec.domain_spans_nodes)."""
        return self.node.domain_spans_nodes

    @property
    def nvlink_domain_gpus(self) -> int:
        """GPUs one NVLink domain joins as built: 72 for a GB200 NVL72 rack of 4-GPU trays, the node's 8 for an
        HGX board, 2 for a bridged pair; 1 where the GPUs have no NVLink between them."""
        su = self.node.scale_up
        return su.domain_size if su.is_nvlink else 1

    @property
    def nodes_per_domain(self) -> int:
        """Nodes one NVLink domain holds (18 trays of an NVL72 rack); 1 where the domain is inside a node."""
        return self.node.scale_up.domain_size // self.node.gpus if self.domain_spans_nodes else 1

    def domain_split(self) -> tuple[int, int]:
        """(NVLink domains, GPUs in each) that this System's GPUs occupy, spread evenly in whole nodes; without a
        domain that spans nodes, (nodes, GPUs per node). NCCL treats each such domain as one node."""
        if not self.domain_spans_nodes:
            return self.nodes, self.node.gpus
        domains, nodes_each = split_into_domains(self.nodes, self.nodes_per_domain, self.node.gpus)
        return domains, nodes_each * self.node.gpus

    @property
    def max_nccl_node_gpus(self) -> int:
        """The most GPUs NCCL can join as one node on this node type, however many nodes the System has: a node's,
        or a whole NVLink domain that spans nodes (72 for NVL72 trays)."""
        return self.node.scale_up.domain_size if self.domain_spans_nodes else self.node.gpus

    @property
    def nccl_node_gpus(self) -> int:
        """GPUs NCCL joins as one node (its localRanks): a node's, or with an NVLink domain across nodes (NCCL's
        multi-node NVLink) the GPUs of one domain this System holds."""
        return self.domain_split()[1]

    @property
    def nccl_nodes(self) -> int:
        """Nodes as NCCL counts them (nNodes): nodes, or the NVLink domains the System's GPUs span."""
        return self.domain_split()[0]

    def with_nodes(self, nodes: int) -> System:
        """The same node type at another node count (spread evenly over NVLink domains that span nodes)."""
        if nodes < 1:
            raise ValueError(f"node count must be at least 1, got {nodes}")
        if self.domain_spans_nodes:
            split_into_domains(nodes, self.nodes_per_domain, self.node.gpus, f" on {self.id}")
        return replace(self, nodes=nodes)

    def with_gpus(self, gpus: int) -> System:
        """Enough nodes of this type for `gpus` GPUs; `gpus` must fill whole nodes beyond the first. Fewer GPUs
        than a node are a node of that many, whose NVLink domain shrinks with it."""
        per_node = self.node.gpus
        if gpus < per_node:
            scale_up = replace(self.node.scale_up, domain_size=min(self.node.scale_up.domain_size, gpus))
            return replace(self, nodes=1, node=replace(self.node, gpus=gpus, scale_up=scale_up))
        if gpus % per_node:
            raise ValueError(f"{gpus} GPUs do not fill whole nodes of {per_node} GPUs on {self.id}")
        return self.with_nodes(gpus // per_node)


def split_into_domains(nodes: int, nodes_per_domain: int, gpus_per_node: int = 1, where: str = "") -> tuple[int, int]:
    """(domains, nodes in each) for `nodes` nodes spread evenly over NVLink domains of `nodes_per_domain` nodes:
    the fewest domains that take the same number each (1,024 GPUs of NVL72 trays: 16 racks of 64). ValueError when
    that leaves each domain less than half full (19 trays would be 19 domains of one), which no one would book."""
    if nodes <= nodes_per_domain:
        return 1, nodes
    domains = -(-nodes // nodes_per_domain)
    while nodes % domains:
        domains += 1
    each = nodes // domains
    if 2 * each < nodes_per_domain:
        per_domain = nodes_per_domain * gpus_per_node
        whole = nodes // nodes_per_domain
        fits = " or ".join(str(n * per_domain) for n in (whole, whole + 1) if n > 0)
        raise ValueError(f"{nodes * gpus_per_node} GPUs ({nodes} nodes of {gpus_per_node}) do not spread evenly "
                         f"over NVLink domains of {per_domain} GPUs{where} (each would hold "
                         f"{each * gpus_per_node}); use whole domains, e.g. {fits} GPUs")
    return domains, each
