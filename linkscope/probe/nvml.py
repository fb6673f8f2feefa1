"""GPUs, NVLinks, PCIe links and the GPU-to-GPU matrix through NVML (the `nvidia-ml-py` package, `import pynvml`).

Chosen at run time: `pynvml` is imported only when this reader runs, and the reader reports itself unavailable when
the package is missing, the driver is not loaded or there is no GPU. Each query is tried on its own, because
drivers and bindings differ in what they support; a query that fails leaves its field None.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from collections.abc import Callable

from linkscope.probe.records import NVLINK_TO_SWITCH, GpuInfo, NvLink, normalize_bus_id
from linkscope.probe.topo_matrix import TopoMatrix

_GIB = float(1 << 30)
_FEATURE_ENABLED = 1
_DEVICE_TYPE_SWITCH = 2
_P2P_CAPS_INDEX_NVLINK = 2
_P2P_STATUS_OK = 0
# nvmlDeviceGetTopologyCommonAncestor levels, named as `nvidia-smi topo -m` prints them.
_TOPOLOGY_LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlFieldValue_t.valueType -> the union member that holds the value.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


@dataclass
class NvmlReading:
    """What NVML reported. `error` says why there are no GPUs when there are none."""

    gpus: list[GpuInfo] = field(default_factory=list)
    topo: TopoMatrix | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    """GPUs NVML lists but could not open."""


def import_pynvml() -> ModuleType | None:
    """The `pynvml` module of nvidia-ml-py, or None when it is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def read_nvml(nvml: Any | None = None, pci_root: Path = Path("/sys/bus/pci/devices")) -> NvmlReading:
    """Read every GPU through NVML; `nvml` defaults to the installed `pynvml`. Never raises for a missing driver."""
    nvml = nvml if nvml is not None else import_pynvml()
    if nvml is None:
        return NvmlReading(error="nvidia-ml-py (pynvml) is not installed")
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...: no usable driver here
        return NvmlReading(error=f"NVML did not start: {exc}")
    try:
        return _read_all(nvml, pci_root)
    finally:
        _try(nvml.nvmlShutdown)


def _read_all(nvml: Any, pci_root: Path) -> NvmlReading:
    reading = NvmlReading(driver_version=_decode(_try(nvml.nvmlSystemGetDriverVersion)),
                          cuda_driver_version=_cuda_version(_try(nvml.nvmlSystemGetCudaDriverVersion)))
    count = _try(nvml.nvmlDeviceGetCount) or 0
    if count == 0:
        reading.error = "NVML reports no GPU"
        return reading
    opened = [(i, _call(nvml, "nvmlDeviceGetHandleByIndex", i)) for i in range(count)]
    lost = [str(i) for i, handle in opened if handle is None]
    if lost:
        reading.notes.append(f"NVML could not open GPU {', '.join(lost)}")
    handles = [(i, handle) for i, handle in opened if handle is not None]
    reading.gpus = [_gpu(nvml, i, handle, pci_root) for i, handle in handles]
    reading.topo = _matrix(nvml, [handle for _, handle in handles], reading.gpus)
    return reading


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    """Call one NVML function; None when it fails or the binding lacks it (older drivers, unsupported GPUs)."""
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported, NoPermission, FunctionNotFound: the field stays unknown
        return None


def _call(nvml: Any, name: str, *args: Any) -> Any:
    fn = getattr(nvml, name, None)
    return None if fn is None else _try(fn, *args)


def _decode(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(value: Any) -> str | None:
    """NVML gives the CUDA driver version as an integer, 12020 for 12.2."""
    if not isinstance(value, int) or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def _free_gib(memory: Any) -> float | None:
    free = getattr(memory, "free", None)
    return round(free / _GIB, 2) if isinstance(free, (int, float)) and free >= 0 else None


def _gpu(nvml: Any, index: int, handle: Any, pci_root: Path) -> GpuInfo:
    pci = _call(nvml, "nvmlDeviceGetPciInfo", handle)
    memory = _call(nvml, "nvmlDeviceGetMemoryInfo", handle)
    capability = _call(nvml, "nvmlDeviceGetCudaComputeCapability", handle)
    bus_id = normalize_bus_id(_decode(getattr(pci, "busId", None)))
    return GpuInfo(
        index=index,
        name=_decode(_call(nvml, "nvmlDeviceGetName", handle)) or f"GPU {index}",
        uuid=_decode(_call(nvml, "nvmlDeviceGetUUID", handle)),
        pci_bus_id=bus_id,
        memory_gib=None if memory is None else round(memory.total / _GIB, 2),
        memory_free_gib=_free_gib(memory),
        pcie_gen_current=_call(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        pcie_gen_max=_call(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        pcie_width_current=_call(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        pcie_width_max=_call(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
        numa_node=read_pci_numa_node(pci_root, bus_id),
        compute_capability=None if capability is None else f"{capability[0]}.{capability[1]}",
        nvlinks=_nvlinks(nvml, handle),
    )


def read_pci_numa_node(pci_root: Path, bus_id: str | None) -> int | None:
    """The NUMA node sysfs gives a PCI device, None when unknown (the kernel writes -1 then)."""
    if bus_id is None:
        return None
    try:
        value = int((pci_root / bus_id / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def _nvlinks(nvml: Any, handle: Any) -> list[NvLink]:
    speed_gb_per_s = _nvlink_speed_gb_per_s(nvml, handle)
    links = []
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _call(nvml, "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            continue  # this link index does not exist on the GPU
        active = state == _FEATURE_ENABLED
        links.append(NvLink(link=link, active=active, gb_per_s=speed_gb_per_s if active else None,
                            remote=_remote(nvml, handle, link) if active else None))
    return links


def _nvlink_speed_gb_per_s(nvml: Any, handle: Any) -> float | None:
    """The common per-link rate of the active links; NVML gives MBps, nvidia-smi prints the same value in GB/s."""
    field_id = getattr(nvml, "NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON", None)
    if field_id is None:
        return None
    values = _call(nvml, "nvmlDeviceGetFieldValues", handle, [field_id])
    if not values or getattr(values[0], "nvmlReturn", 1) != 0:
        return None
    member = _VALUE_MEMBERS.get(getattr(values[0], "valueType", 1), "uiVal")
    mbps = getattr(values[0].value, member, None)
    return None if not mbps else round(float(mbps) / 1000.0, 4)


def _remote(nvml: Any, handle: Any, link: int) -> str | None:
    if _call(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link) == _DEVICE_TYPE_SWITCH:
        return NVLINK_TO_SWITCH
    pci = _call(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2", handle, link)
    if pci is None:
        pci = _call(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
    return normalize_bus_id(_decode(getattr(pci, "busId", None)))


def _matrix(nvml: Any, handles: list[Any], gpus: list[GpuInfo]) -> TopoMatrix:
    """The GPU-to-GPU part of `nvidia-smi topo -m`, rebuilt from NVML (no NIC columns)."""
    labels = [f"GPU{gpu.index}" for gpu in gpus]
    topo = TopoMatrix(columns=labels, source="nvml")
    for a, gpu_a in enumerate(gpus):
        row = {}
        for b, gpu_b in enumerate(gpus):
            row[labels[b]] = "X" if a == b else _pair_cell(nvml, handles[a], handles[b], gpu_a, gpu_b)
        topo.cells[labels[a]] = row
    return topo


def _pair_cell(nvml: Any, handle_a: Any, handle_b: Any, a: GpuInfo, b: GpuInfo) -> str:
    links = nvlinks_between(a, b)
    if links == 0 and _call(nvml, "nvmlDeviceGetP2PStatus", handle_a, handle_b, _P2P_CAPS_INDEX_NVLINK) == \
            _P2P_STATUS_OK and not _remotes_known(a):
        # The driver says the pair talks over NVLink but did not say where the links go.
        links = min(a.active_nvlinks, b.active_nvlinks)
    if links:
        return f"NV{links}"
    level = _call(nvml, "nvmlDeviceGetTopologyCommonAncestor", handle_a, handle_b)
    return _TOPOLOGY_LEVELS.get(level, "SYS") if level is not None else "N/A"


def _remotes_known(gpu: GpuInfo) -> bool:
    return any(link.remote for link in gpu.nvlinks if link.active)


def nvlinks_between(a: GpuInfo, b: GpuInfo) -> int:
    """Bonded NVLinks between two GPUs: direct links, or, through NVSwitch, the smaller switch link count."""
    direct = sum(1 for link in a.nvlinks if link.active and link.remote and link.remote == b.pci_bus_id)
    if direct:
        return direct
    to_switch_a = sum(1 for link in a.nvlinks if link.active and link.remote == NVLINK_TO_SWITCH)
    to_switch_b = sum(1 for link in b.nvlinks if link.active and link.remote == NVLINK_TO_SWITCH)
    return min(to_switch_a, to_switch_b)
