"""What the probe reads from a machine, as plain dataclasses: GPUs and their links, RDMA ports, Ethernet NICs, host.

Every field is what the machine reported, nothing derived from a datasheet; None where it could not be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NVLINK_TO_SWITCH = "switch"
"""`NvLink.remote` value for a link that ends on an NVSwitch rather than on another GPU."""


@dataclass
class NvLink:
    """One NVLink of a GPU. `gb_per_s` is the per-link rate the driver reports (per direction)."""

    link: int
    active: bool
    gb_per_s: float | None = None
    remote: str | None = None
    """PCI bus id of the GPU at the other end, `switch` for an NVSwitch, None when unknown."""


@dataclass
class GpuInfo:
    """One GPU as NVML or nvidia-smi reports it."""

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_gib: float | None = None
    memory_free_gib: float | None = None
    """Memory not in use when probed (NVML); what `check --full` may fill with its largest message."""
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    numa_node: int | None = None
    compute_capability: str | None = None
    nvlinks: list[NvLink] = field(default_factory=list)

    @property
    def active_nvlinks(self) -> int:
        """Links that are up."""
        return sum(1 for link in self.nvlinks if link.active)

    @property
    def nvlink_reported_gb_per_s(self) -> float | None:
        """Sum of the reported rates of the active links (above the datasheet figure on A100/H100, see to_system)."""
        rates = [link.gb_per_s for link in self.nvlinks if link.active and link.gb_per_s is not None]
        return round(sum(rates), 4) if rates else None


@dataclass
class RdmaPort:
    """One port of an RDMA device from /sys/class/infiniband (or `ibstat`)."""

    device: str
    port: int
    link_layer: str | None = None
    """`InfiniBand`, `Ethernet` (RoCE) or whatever the driver reports (EFA reports `Unspecified`)."""
    state: str | None = None
    phys_state: str | None = None
    rate_gbit_per_s: float | None = None
    rate_text: str | None = None
    """The rate as written, e.g. `400 Gb/sec (4X NDR)`; the lane speed name gives the InfiniBand generation."""
    driver: str | None = None
    netdevs: list[str] = field(default_factory=list)
    numa_node: int | None = None

    @property
    def active(self) -> bool:
        """The port is up (ACTIVE)."""
        return (self.state or "").upper() == "ACTIVE"

    @property
    def speed_name(self) -> str | None:
        """The InfiniBand lane speed name in the rate (`NDR` in `400 Gb/sec (4X NDR)`), if any."""
        text = self.rate_text or ""
        if "(" not in text:
            return None
        inner = text.split("(", 1)[1].rstrip(")").split()
        return inner[-1].upper() if len(inner) >= 2 else None


@dataclass
class EthernetNic:
    """A physical Ethernet interface from /sys/class/net with a readable speed."""

    name: str
    speed_gbit_per_s: float | None
    operstate: str | None = None


@dataclass
class NumaNode:
    """One NUMA node and its CPUs (as the kernel's cpulist, e.g. `0-47,96-143`)."""

    id: int
    cpulist: str
    memory_gib: float | None = None


@dataclass
class HostInfo:
    """The host: name, CPU, sockets, NUMA layout, memory, kernel."""

    hostname: str
    cpu_model: str | None = None
    cpu_vendor: str | None = None
    """`intel`, `amd`, `arm`, or None when /proc/cpuinfo does not say."""
    cpu_sockets: int | None = None
    logical_cpus: int | None = None
    numa_nodes: list[NumaNode] = field(default_factory=list)
    memory_gib: float | None = None
    kernel: str | None = None


def normalize_bus_id(bus_id: str | None) -> str | None:
    """A PCI address as sysfs writes it (`0000:18:00.0`); NVML and nvidia-smi print an 8-digit domain."""
    if not bus_id:
        return None
    text = bus_id.strip().lower()
    domain, sep, rest = text.partition(":")
    if not sep or not rest:
        return text
    return f"{domain[-4:].rjust(4, '0')}:{rest}"
