"""RDMA ports: /sys/class/infiniband (InfiniBand, RoCE, EFA).

sysfs per port: `rate` is the kernel's `"%d%s Gb/sec (%dX%s)"` (e.g. `400 Gb/sec (4X NDR)`), `state` `4: ACTIVE`,
`phys_state` `5: LinkUp`, `link_layer` `InfiniBand` or `Ethernet` (RoCE). The root directory is a parameter so a
recorded tree can stand in for the live one.
"""

from __future__ import annotations

import re
from pathlib import Path

from linkscope.probe.records import RdmaPort
from linkscope.probe.text import to_float

SYSFS_ROOT = Path("/sys/class/infiniband")
_RATE = re.compile(r"^\s*([\d.]+)\s*Gb/sec", re.IGNORECASE)


def read_rdma_ports(root: Path = SYSFS_ROOT) -> list[RdmaPort]:
    """Every port of every RDMA device under `root`; an absent directory means none (no RDMA stack)."""
    if not root.is_dir():
        return []
    ports: list[RdmaPort] = []
    for device in sorted(p for p in root.iterdir() if (p / "ports").is_dir()):
        driver, netdevs, numa = _device_facts(device)
        for port_dir in sorted((device / "ports").iterdir(), key=lambda p: _port_number(p.name)):
            port = _read_port(device.name, port_dir)
            if port is not None:
                port.driver, port.netdevs, port.numa_node = driver, netdevs, numa
                ports.append(port)
    return ports


def _port_number(name: str) -> int:
    return int(name) if name.isdigit() else 1 << 30


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _after_colon(value: str | None) -> str | None:
    """`4: ACTIVE` -> `ACTIVE`; a value without a numeric prefix is kept."""
    if value is None:
        return None
    return value.split(":", 1)[1].strip() if ":" in value else value


def _read_port(device: str, port_dir: Path) -> RdmaPort | None:
    if not port_dir.name.isdigit():
        return None
    rate_text = _read(port_dir / "rate")
    return RdmaPort(device=device, port=int(port_dir.name), link_layer=_read(port_dir / "link_layer"),
                    state=_after_colon(_read(port_dir / "state")),
                    phys_state=_after_colon(_read(port_dir / "phys_state")),
                    rate_gbit_per_s=parse_rate_gbit_per_s(rate_text), rate_text=rate_text)


def parse_rate_gbit_per_s(text: str | None) -> float | None:
    """`400 Gb/sec (4X NDR)` -> 400.0; None when absent or unreadable."""
    match = _RATE.match(text or "")
    return float(match.group(1)) if match else None


def _device_facts(device: Path) -> tuple[str | None, list[str], int | None]:
    """Driver (mlx5_core, efa...), network interfaces and NUMA node of the PCI function behind a device."""
    pci = device / "device"
    driver = None
    for line in (_read(pci / "uevent") or "").splitlines():
        if line.startswith("DRIVER="):
            driver = line.split("=", 1)[1]
    if driver is None and (pci / "driver").exists():
        driver = (pci / "driver").resolve().name
    net = pci / "net"
    netdevs = sorted(p.name for p in net.iterdir()) if net.is_dir() else []
    numa = to_float(_read(pci / "numa_node"))
    return driver, netdevs, None if numa is None or numa < 0 else int(numa)
