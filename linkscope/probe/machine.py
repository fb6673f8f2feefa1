"""Probe the live machine: GPUs through NVML, else `nvidia-smi`, else none; RDMA ports, Ethernet NICs, the host.

The result is exactly what was read. Turning it into a System (and the datasheet assumptions that takes) is
`to_system`'s job.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from linkscope.probe.ethernet import SYSFS_ROOT as NET_ROOT
from linkscope.probe.ethernet import read_ethernet_nics
from linkscope.probe.fabric import IMEX_CHANNELS, IMEX_NODES_CONFIG, FabricReading, ImexReading, read_fabric, read_imex
from linkscope.probe.host import HostPaths, read_host
from linkscope.probe.infiniband import SYSFS_ROOT as IB_ROOT
from linkscope.probe.infiniband import read_rdma_ports
from linkscope.probe.nvml import read_nvml
from linkscope.probe.records import EthernetNic, GpuInfo, HostInfo, RdmaPort
from linkscope.probe.runner import CommandRunner, run_command
from linkscope.probe.smi import SmiReading, read_smi, read_topo
from linkscope.probe.text import Problem
from linkscope.probe.topo_matrix import TopoMatrix

GpuSource = Literal["nvml", "nvidia-smi", "none"]
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
"""Kernel modules that let an RDMA NIC read and write GPU memory (GPUDirect RDMA)."""


@dataclass(frozen=True)
class ProbePaths:
    """Where the probe reads sysfs and procfs; tests point these at recorded trees."""

    host: HostPaths = HostPaths()
    infiniband: Path = IB_ROOT
    net: Path = NET_ROOT
    pci: Path = Path("/sys/bus/pci/devices")
    modules: Path = Path("/sys/module")
    imex_nodes_config: Path = IMEX_NODES_CONFIG
    imex_channels: Path = IMEX_CHANNELS


@dataclass
class MachineProbe:
    """Everything read from one machine."""

    host: HostInfo
    gpu_source: GpuSource = "none"
    gpus: list[GpuInfo] = field(default_factory=list)
    topo: TopoMatrix | None = None
    rdma_ports: list[RdmaPort] = field(default_factory=list)
    ethernet: list[EthernetNic] = field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    peermem_module: str | None = None
    """The GPUDirect RDMA kernel module found loaded, None when neither is."""
    fabric: FabricReading | None = None
    """The GPUs' NVLink fabric registration (`nvidia-smi -q -x`), None where it could not be read."""
    imex: ImexReading | None = None
    """The IMEX domain (`nvidia-imex-ctl -N` or its files), None on a machine without GPUs."""
    problems: list[Problem] = field(default_factory=list)
    """Output that could not be parsed, with line numbers."""
    notes: list[str] = field(default_factory=list)
    """Why a source gave nothing (NVML missing, nvidia-smi not found...)."""

    def to_dict(self) -> dict[str, Any]:
        """A stable JSON object: the same keys on every machine, None or empty where nothing was read."""
        return {
            "host": asdict(self.host),
            "gpu_source": self.gpu_source,
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "gpus": [{**asdict(gpu), "active_nvlinks": gpu.active_nvlinks,
                      "nvlink_reported_gb_per_s": gpu.nvlink_reported_gb_per_s} for gpu in self.gpus],
            "topo": None if self.topo is None else self.topo.to_dict(),
            "rdma_ports": [{**asdict(port), "active": port.active} for port in self.rdma_ports],
            "ethernet": [asdict(nic) for nic in self.ethernet],
            "peermem_module": self.peermem_module,
            "fabric": None if self.fabric is None else self.fabric.to_dict(),
            "imex": None if self.imex is None else self.imex.to_dict(),
            "problems": [p.to_dict() for p in self.problems],
            "notes": list(self.notes),
        }


def probe_machine(runner: CommandRunner = run_command, paths: ProbePaths = ProbePaths(),
                  nvml: Any | None = None, use_nvml: bool = True) -> MachineProbe:
    """Read this machine. NVML first (when nvidia-ml-py is installed and a GPU answers), then `nvidia-smi`.

    `runner` runs external commands and `nvml` stands for the `pynvml` module; both exist so recorded outputs can
    be replayed. A machine without GPUs gives a result with `gpu_source == "none"` and the reasons in `notes`.
    """
    probe = MachineProbe(host=read_host(paths.host))
    if not (use_nvml and _from_nvml(probe, runner, paths, nvml)):
        _from_smi(probe, runner)
    if probe.gpus:
        _add_fabric(probe, runner, paths)
    probe.rdma_ports = read_rdma_ports(paths.infiniband)
    probe.ethernet = read_ethernet_nics(paths.net)
    probe.peermem_module = next((m for m in PEERMEM_MODULES if (paths.modules / m).exists()), None)
    return probe


def _add_fabric(probe: MachineProbe, runner: CommandRunner, paths: ProbePaths) -> None:
    """The NVLink fabric the GPUs joined and the IMEX domain across nodes (GB200/GB300 NVL72 trays)."""
    probe.fabric, why = read_fabric(runner)
    if why is not None:
        probe.notes.append(f"fabric state not read: {why}")
    elif probe.fabric is not None:
        probe.problems.extend(probe.fabric.problems)
    probe.imex = read_imex(runner, paths.imex_nodes_config, paths.imex_channels)
    probe.problems.extend(probe.imex.problems)


def _from_nvml(probe: MachineProbe, runner: CommandRunner, paths: ProbePaths, nvml: Any | None) -> bool:
    reading = read_nvml(nvml, paths.pci)
    if not reading.gpus:
        probe.notes.append(f"NVML: {reading.error}")
        return False
    probe.gpu_source = "nvml"
    probe.gpus = reading.gpus
    probe.notes.extend(f"NVML: {note}" for note in reading.notes)
    probe.driver_version = reading.driver_version
    probe.cuda_driver_version = reading.cuda_driver_version
    # nvidia-smi's matrix also places the NICs; NVML's own rebuild covers the GPUs only.
    smi = SmiReading()
    topo = read_topo(runner, smi)
    probe.problems.extend(smi.problems)
    probe.topo = topo if topo is not None and topo.gpus else reading.topo
    return True


def _from_smi(probe: MachineProbe, runner: CommandRunner) -> None:
    reading = read_smi(runner)
    probe.problems.extend(reading.problems)
    probe.notes.extend(f"nvidia-smi: {error}" for error in reading.errors)
    if not reading.gpus:
        return
    probe.gpu_source = "nvidia-smi"
    probe.gpus = reading.gpus
    probe.topo = reading.topo
    probe.driver_version = reading.driver_version
