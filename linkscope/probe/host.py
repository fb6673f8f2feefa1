"""The host: name, CPU model and vendor (/proc/cpuinfo), sockets, NUMA nodes (/sys/devices/system/node), memory."""

from __future__ import annotations

import os
import platform
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from linkscope.probe.records import HostInfo, NumaNode

_VENDORS = {"genuineintel": "intel", "authenticamd": "amd", "hygongenuine": "amd"}
# Arm cores carry no vendor_id, only an implementer code (0x41 Arm, 0x4e NVIDIA, 0x48 HiSilicon, 0xc0 Ampere).
_ARM_KEYS = ("cpu implementer", "cpu architecture")
_KIB_PER_GIB = 1024.0 * 1024.0
_NODE_DIR = re.compile(r"^node(\d+)$")


@dataclass(frozen=True)
class HostPaths:
    """Where the host facts are read from; tests point these at a recorded tree."""

    cpuinfo: Path = Path("/proc/cpuinfo")
    meminfo: Path = Path("/proc/meminfo")
    node_root: Path = Path("/sys/devices/system/node")
    cpu_root: Path = Path("/sys/devices/system/cpu")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def parse_cpuinfo(text: str) -> tuple[str | None, str | None, int | None, int]:
    """(model name, vendor as intel/amd/arm, sockets, logical CPUs) from /proc/cpuinfo text."""
    model = vendor = None
    sockets: set[str] = set()
    logical = 0
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep:
            continue
        if key == "processor":
            logical += 1
        elif key in ("model name", "cpu model") and model is None:
            model = value
        elif key == "vendor_id" and vendor is None:
            vendor = _VENDORS.get(value.lower())
        elif key in _ARM_KEYS and vendor is None:
            vendor = "arm"
        elif key == "physical id":
            sockets.add(value)
    return model, vendor, (len(sockets) or None), logical


def _sockets_from_sysfs(cpu_root: Path) -> int | None:
    ids = {_read(p).strip() for p in cpu_root.glob("cpu[0-9]*/topology/physical_package_id")}
    ids.discard("")
    return len(ids) or None


def read_numa_nodes(node_root: Path) -> list[NumaNode]:
    """NUMA nodes with their CPU lists and memory; empty when the kernel exposes none."""
    if not node_root.is_dir():
        return []
    nodes = []
    for path in node_root.iterdir():
        match = _NODE_DIR.match(path.name)
        if match:
            nodes.append(NumaNode(id=int(match.group(1)), cpulist=_read(path / "cpulist").strip(),
                                  memory_gib=_node_memory_gib(_read(path / "meminfo"))))
    return sorted(nodes, key=lambda node: node.id)


def _node_memory_gib(text: str) -> float | None:
    match = re.search(r"MemTotal:\s+(\d+)\s*kB", text)
    return round(int(match.group(1)) / _KIB_PER_GIB, 2) if match else None


def read_host(paths: HostPaths = HostPaths()) -> HostInfo:
    """Everything about the host the probe reports; fields it cannot read stay None."""
    model, vendor, sockets, logical = parse_cpuinfo(_read(paths.cpuinfo))
    return HostInfo(
        hostname=socket.gethostname(),
        cpu_model=model,
        cpu_vendor=vendor,
        cpu_sockets=sockets or _sockets_from_sysfs(paths.cpu_root),
        logical_cpus=logical or os.cpu_count(),
        numa_nodes=read_numa_nodes(paths.node_root),
        memory_gib=_node_memory_gib(_read(paths.meminfo)),
        kernel=platform.release() or None,
    )


def available_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """Memory the host can still give (MemAvailable), bytes; None where unknown."""
    try:
        match = re.search(r"MemAvailable:\s+(\d+)\s*kB", meminfo.read_text(encoding="utf-8"))
    except OSError:
        match = None
    if match:
        return int(match.group(1)) * 1024.0
    if hasattr(os, "sysconf"):
        try:
            return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError):
            return None
    return None
