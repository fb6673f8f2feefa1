"""Physical Ethernet interfaces and their speeds from /sys/class/net, for nodes without RDMA (TCP between nodes)."""

from __future__ import annotations

from pathlib import Path

from linkscope.probe.records import EthernetNic

SYSFS_ROOT = Path("/sys/class/net")
_ARPHRD_ETHER = "1"  # /sys/class/net/<if>/type; InfiniBand (IPoIB) interfaces are 32


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # `speed` raises EINVAL on interfaces that have no link speed
        return None


def read_ethernet_nics(root: Path = SYSFS_ROOT) -> list[EthernetNic]:
    """Physical Ethernet interfaces (those backed by a device), fastest first; speed None when not reported."""
    if not root.is_dir():
        return []
    nics = [_nic(path) for path in sorted(root.iterdir()) if _is_physical_ethernet(path)]
    return sorted(nics, key=lambda nic: -(nic.speed_gbit_per_s or 0.0))


def _is_physical_ethernet(path: Path) -> bool:
    # Virtual interfaces (lo, bridges, veth, ifb) have no `device` entry.
    return (path / "device").exists() and _read(path / "type") == _ARPHRD_ETHER


def _nic(path: Path) -> EthernetNic:
    speed_mbit_per_s = _read(path / "speed")
    speed = int(speed_mbit_per_s) if speed_mbit_per_s and speed_mbit_per_s.lstrip("-").isdigit() else -1
    # The kernel reports -1 (or 4294967295) when the speed is unknown, e.g. on many virtio NICs.
    known = 0 < speed < 4_000_000
    return EthernetNic(name=path.name, speed_gbit_per_s=speed / 1000.0 if known else None,
                       operstate=_read(path / "operstate"))


def fastest_nic(nics: list[EthernetNic]) -> EthernetNic | None:
    """The fastest interface that is up and has a known speed."""
    usable = [nic for nic in nics if nic.speed_gbit_per_s and (nic.operstate or "up") == "up"]
    return max(usable, key=lambda nic: nic.speed_gbit_per_s or 0.0, default=None)
