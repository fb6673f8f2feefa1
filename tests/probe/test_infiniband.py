"""RDMA ports from a sysfs tree (/sys/class/infiniband) and from `ibstat` text."""

from __future__ import annotations

from pathlib import Path

from linkscope.probe.infiniband import parse_rate_gbit_per_s, read_rdma_ports
from tests.probe.fixtures import HGX_TREE


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
