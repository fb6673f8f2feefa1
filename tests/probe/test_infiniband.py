"""RDMA ports from a sysfs tree (/sys/class/infiniband) and from `ibstat` text."""

from __future__ import annotations

from pathlib import Path

from linkscope.probe.infiniband import parse_ibstat, parse_rate_gbit_per_s, read_rdma_ports
from tests.probe.fixtures import HGX_TREE, fixture_text


def test_sysfs_ports_read_rate_state_and_link_layer() -> None:
    ports = read_rdma_ports(HGX_TREE / "class" / "infiniband")
    assert [p.device for p in ports] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    first = ports[0]
    assert (first.port, first.link_layer, first.state, first.phys_state) == (1, "InfiniBand", "ACTIVE", "LinkUp")
    assert first.rate_gbit_per_s == 400.0 and first.rate_text == "400 Gb/sec (4X NDR)"
    assert first.speed_name == "NDR"
    assert first.active


def test_sysfs_ports_read_the_pci_function_behind_each_device() -> None:
    ports = {p.device: p for p in read_rdma_ports(HGX_TREE / "class" / "infiniband")}
    assert ports["mlx5_0"].driver == "mlx5_core"
    assert ports["mlx5_0"].netdevs == ["ibp26s0"]
    assert ports["mlx5_1"].numa_node == 1


def test_down_port_is_not_active() -> None:
    ports = {p.device: p for p in read_rdma_ports(HGX_TREE / "class" / "infiniband")}
    assert ports["mlx5_3"].state == "DOWN" and ports["mlx5_3"].phys_state == "Disabled"
    assert not ports["mlx5_3"].active


def test_missing_sysfs_root_means_no_rdma(tmp_path: Path) -> None:
    assert read_rdma_ports(tmp_path / "no-such-dir") == []


def test_port_with_missing_files_keeps_what_exists(tmp_path: Path) -> None:
    port_dir = tmp_path / "rdmap0s31" / "ports" / "1"
    port_dir.mkdir(parents=True)
    (port_dir / "state").write_text("4: ACTIVE\n")
    (tmp_path / "rdmap0s31" / "device").mkdir()
    (tmp_path / "rdmap0s31" / "device" / "uevent").write_text("DRIVER=efa\n")
    (port, ) = read_rdma_ports(tmp_path)
    assert port.active and port.driver == "efa"
    assert port.rate_gbit_per_s is None and port.link_layer is None


def test_rate_strings_of_the_kernel_format() -> None:
    assert parse_rate_gbit_per_s("200 Gb/sec (4X HDR)") == 200.0
    assert parse_rate_gbit_per_s("2.5 Gb/sec (1X SDR)") == 2.5
    assert parse_rate_gbit_per_s("fast") is None
    assert parse_rate_gbit_per_s(None) is None


def test_ibstat_infiniband_block() -> None:
    ports, problems = parse_ibstat(fixture_text("ibstat_infiniband.txt"))
    assert problems == []
    (port,) = ports
    assert (port.device, port.port, port.state, port.phys_state) == ("mlx5_7", 1, "ACTIVE", "LinkUp")
    assert port.rate_gbit_per_s == 200.0 and port.link_layer == "InfiniBand"
    assert port.speed_name is None  # ibstat prints the rate only, not the lane speed name


def test_ibstat_roce_block_has_ethernet_link_layer() -> None:
    (port,), problems = parse_ibstat(fixture_text("ibstat_roce.txt"))
    assert problems == []
    assert port.link_layer == "Ethernet" and port.rate_gbit_per_s == 100.0 and port.active


def test_ibstat_stray_lines_are_problems() -> None:
    text = "Port 1:\nCA 'mlx5_0'\n\tPort 1:\n\t\tState: Down\n\t\tnonsense\n"
    ports, problems = parse_ibstat(text)
    assert [(p.line, p.message) for p in problems] == [(1, "unexpected line"), (5, "unexpected line")]
    assert ports[0].state == "DOWN"
