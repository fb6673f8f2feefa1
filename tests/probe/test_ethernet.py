"""Physical Ethernet NICs and their speeds from /sys/class/net."""

from __future__ import annotations

from pathlib import Path

from linkscope.probe.ethernet import fastest_nic, read_ethernet_nics
from linkscope.probe.records import EthernetNic
from tests.probe.fixtures import HGX_TREE


def test_only_physical_ethernet_interfaces_are_listed() -> None:
    nics = read_ethernet_nics(HGX_TREE / "class" / "net")
    assert [(n.name, n.speed_gbit_per_s, n.operstate) for n in nics] == [("eth0", 100.0, "up")]


def test_unknown_speed_reads_as_none(tmp_path: Path) -> None:
    nic = tmp_path / "ens5"
    (nic / "device").mkdir(parents=True)
    (nic / "type").write_text("1\n")
    (nic / "speed").write_text("-1\n")
    (found,) = read_ethernet_nics(tmp_path)
    assert found.speed_gbit_per_s is None


def test_fastest_nic_skips_down_and_unknown_interfaces() -> None:
    nics = [EthernetNic("a", 25.0, "up"), EthernetNic("b", 200.0, "down"), EthernetNic("c", None, "up"),
            EthernetNic("d", 100.0, "up")]
    assert fastest_nic(nics) == nics[3]
    assert fastest_nic([]) is None
