"""Probe result -> System: scale-up kind from the GPU pairs, datasheet NVLink rates, NICs, and honest refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.hardware.serialize import system_dict, system_from_dict
from linkscope.hardware.system import ScaleOut
from linkscope.probe.machine import MachineProbe, probe_machine
from linkscope.probe.nccl_findings import Expectations
from linkscope.probe.records import EthernetNic, GpuInfo, HostInfo, NvLink, RdmaPort
from linkscope.probe.to_system import to_system
from linkscope.probe.topo_matrix import parse_topo_matrix
from tests.probe.fixtures import fixture_text, h100_smi_runner, tree_paths


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _probe(name: str, gpus: int, topo_fixture: str | None = None, **gpu_fields: object) -> MachineProbe:
    host = HostInfo(hostname="node1", cpu_vendor="amd", cpu_sockets=2)
    topo = parse_topo_matrix(fixture_text(topo_fixture)) if topo_fixture else None
    return MachineProbe(host=host, gpu_source="nvidia-smi", topo=topo,
                        gpus=[GpuInfo(index=i, name=name, **gpu_fields) for i in range(gpus)])  # type: ignore[arg-type]


def test_hgx_h100_is_an_nvswitch_system_at_the_datasheet_rate(db: HardwareDB) -> None:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    result = to_system(probe, db)
    system = result.system
    assert system is not None and result.reason is None
    su = system.node.scale_up
    assert (su.kind, su.generation, su.bw_gb_per_s, su.domain_size) == ("nvswitch", "nvlink4", 450.0, 8)
    assert su.in_network_reduction == "nvls" and su.links_per_gpu == 18
    assert system.node.gpu.id == "H100-SXM5-80GB" and system.origin == "probe"
    assert system.id == f"probe/{probe.host.hostname}"
    assert system.node.host_pcie == "pcie5"  # the max generation, although GPU 0 idles at Gen1
    assert any("18 active NVLinks x 26.5625 GB/s = 478.125 GB/s" in n for n in result.notes)
    assert "GPU 3: 17 of 18 NVLinks active" in result.notes


def test_hgx_h100_counts_only_gpu_local_active_infiniband_ports(db: HardwareDB) -> None:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    result = to_system(probe, db)
    assert result.system is not None
    so = result.system.node.scale_out
    assert (so.fabric, so.nics, so.nic_gbit_per_s, so.generation, so.gpudirect_rdma) == \
        ("infiniband", 2, 400.0, "ib-ndr", True)
    assert any("not counted: mlx5_2" in n for n in result.notes)
    assert any("mlx5_3 port 1 is DOWN" in n for n in result.notes)
    assert result.system.node.cpu_vendor == "intel" and result.system.node.cpu_sockets == 2


def test_probed_system_round_trips_through_json(db: HardwareDB) -> None:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    system = to_system(probe, db).system
    assert system is not None
    assert system_from_dict(system_dict(system), db.gpu) == system


def test_dgx1_hybrid_cube_mesh_is_an_nvlink_mesh(db: HardwareDB) -> None:
    result = to_system(_probe("Tesla V100-SXM2-32GB", 8, "topo_dgx1_v100.txt"), db)
    assert result.system is not None
    su = result.system.node.scale_up
    assert (su.kind, su.generation, su.bw_gb_per_s, su.links_per_gpu) == ("nvlink-mesh", "nvlink2", 150.0, 6)
    assert su.in_network_reduction == "none"


def test_four_h100_joined_point_to_point_are_a_mesh(db: HardwareDB) -> None:
    result = to_system(_probe("NVIDIA H100 80GB HBM3", 4, "topo_4x_h100_nv6.txt"), db)
    assert result.system is not None
    su = result.system.node.scale_up
    assert (su.kind, su.bw_gb_per_s, su.domain_size) == ("nvlink-mesh", 450.0, 4)
    assert su.pair_bw_gb_per_s() == 150.0


def test_two_pcie_cards_with_nvlink_bridges_are_a_bridge(db: HardwareDB) -> None:
    probe = _probe("NVIDIA A100 80GB PCIe", 2)
    probe.topo = parse_topo_matrix("        GPU0    GPU1\nGPU0     X      NV12\nGPU1    NV12     X\n")
    result = to_system(probe, db)
    assert result.system is not None
    su = result.system.node.scale_up
    assert (su.kind, su.bw_gb_per_s, su.domain_size) == ("nvlink-bridge", 300.0, 2)


def test_pcie_only_gpus_use_the_negotiated_generation_and_width(db: HardwareDB) -> None:
    probe = _probe("NVIDIA L40S", 4, pcie_gen_current=1, pcie_gen_max=4, pcie_width_max=8)
    probe.topo = parse_topo_matrix("        GPU0    GPU1    GPU2    GPU3\nGPU0     X      PIX     NODE    SYS\n"
                                   "GPU1    PIX      X      NODE    SYS\nGPU2    NODE    NODE     X      SYS\n"
                                   "GPU3    SYS     SYS     SYS      X\n")
    result = to_system(probe, db)
    assert result.system is not None
    su = result.system.node.scale_up
    assert (su.kind, su.generation, su.bw_gb_per_s) == ("pcie", "pcie4", 15.75)
    assert "GPUs negotiated PCIe x8, not x16" in result.notes


def test_nvlinks_without_a_matrix_are_assumed_all_to_all(db: HardwareDB) -> None:
    links = [NvLink(link=i, active=True, gb_per_s=25.0) for i in range(12)]
    probe = _probe("NVIDIA A100-SXM4-80GB", 8)
    for gpu in probe.gpus:
        gpu.nvlinks = list(links)
    result = to_system(probe, db)
    assert result.system is not None and result.system.node.scale_up.kind == "nvswitch"
    assert result.system.node.scale_up.bw_gb_per_s == 300.0
    assert "no topology matrix: assumed every GPU pair is joined by all its NVLinks" in result.notes


def test_roce_efa_tcp_and_none(db: HardwareDB) -> None:
    probe = _probe("NVIDIA H100 80GB HBM3", 1)
    probe.rdma_ports = [RdmaPort("mlx5_0", 1, "Ethernet", "ACTIVE", rate_gbit_per_s=200.0)]
    so = _scale_out(probe, db)
    assert (so.fabric, so.nics, so.nic_gbit_per_s, so.generation) == ("roce", 1, 200.0, "roce")
    probe.rdma_ports = [RdmaPort(f"rdmap{i}s0", 1, "Unspecified", "ACTIVE", rate_gbit_per_s=100.0, driver="efa")
                        for i in range(4)]
    so = _scale_out(probe, db)
    assert (so.fabric, so.nics, so.transport) == ("efa", 4, "srd")
    probe.rdma_ports, probe.ethernet = [], [EthernetNic("ens5", 25.0, "up")]
    so = _scale_out(probe, db)
    assert (so.fabric, so.nics, so.nic_gbit_per_s) == ("tcp", 1, 25.0)
    probe.ethernet = []
    assert _scale_out(probe, db).fabric == "none"


def _scale_out(probe: MachineProbe, db: HardwareDB) -> ScaleOut:
    system = to_system(probe, db).system
    assert system is not None
    return system.node.scale_out


def test_ibstat_style_rate_gives_the_generation_with_a_note(db: HardwareDB) -> None:
    probe = _probe("NVIDIA A100-SXM4-80GB", 1)
    probe.rdma_ports = [RdmaPort("mlx5_7", 1, "InfiniBand", "ACTIVE", rate_gbit_per_s=200.0, rate_text="200")]
    result = to_system(probe, db)
    assert result.system is not None and result.system.node.scale_out.generation == "ib-hdr"
    assert "InfiniBand generation inferred from the port rate, assuming 4X ports" in result.notes


def test_cpu_only_machine_is_a_system_of_cpu_ranks(db: HardwareDB) -> None:
    host = HostInfo(hostname="laptop", cpu_model="AMD EPYC", cpu_vendor="amd", cpu_sockets=1, logical_cpus=16,
                    memory_gib=64.0)
    result = to_system(MachineProbe(host=host, notes=["nvidia-smi: `nvidia-smi` not found"]), db)
    system = result.system
    assert system is not None and system.is_cpu_host and result.reason is None
    assert (system.id, system.node.gpus, system.node.scale_up.kind) == ("probe/laptop", 16, "host")
    assert system.node.gpu.memory_gib == 64.0 and system.node.cpu_vendor == "amd"
    assert result.notes[0] == ("no NVIDIA GPU found (nvidia-smi: `nvidia-smi` not found): the System is this "
                               "host's CPU ranks")
    assert result.to_dict()["system"]["gpu"] == "CPU"


def test_a_cpu_host_is_measured_not_modelled(db: HardwareDB) -> None:
    from linkscope.hardware.errors import UserError
    from linkscope.model.comm.tiers import comm_tiers

    system = to_system(MachineProbe(host=HostInfo(hostname="laptop", logical_cpus=2)), db).system
    assert system is not None
    with pytest.raises(UserError, match="no GPU: measure it"):
        comm_tiers(system)


def test_unknown_gpu_keeps_its_name_and_is_reported(db: HardwareDB) -> None:
    result = to_system(_probe("NVIDIA Future X900", 8, "topo_hgx_h100.txt"), db)
    assert result.system is None
    assert result.reason is not None and "GPU 'NVIDIA Future X900' is not in the hardware database" in result.reason


def test_mixed_gpu_models_are_refused(db: HardwareDB) -> None:
    probe = _probe("NVIDIA L4", 2)
    probe.gpus[1].name = "NVIDIA L40S"
    result = to_system(probe, db)
    assert result.system is None and result.reason is not None and "mixed GPU models" in result.reason


def test_expectations_follow_the_probed_system(db: HardwareDB) -> None:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    system = to_system(probe, db).system
    assert system is not None
    assert Expectations.from_system(system) == Expectations(nvlink=True, ib=True, nvls=True, gdr=True)


def test_a_recorded_h200_vm_probe_maps_to_the_h200_and_round_trips(db: HardwareDB) -> None:
    # `linkscope topo --json` on a one-GPU H200 virtual machine (NVML, driver 580.159.04), recorded 2026-12-04.
    recorded = json.loads((Path(__file__).parents[1] / "fixtures" / "probe" / "topo_h200_vm.json").read_text())
    fields = ("index", "name", "uuid", "pci_bus_id", "memory_gib", "pcie_gen_current", "pcie_gen_max",
              "pcie_width_current", "pcie_width_max", "numa_node", "compute_capability")
    gpus = [GpuInfo(**{k: g[k] for k in fields}) for g in recorded["probe"]["gpus"]]
    probe = MachineProbe(host=HostInfo(hostname="vm", cpu_vendor="intel", cpu_sockets=1), gpu_source="nvml",
                         gpus=gpus)
    system = to_system(probe, db).system
    assert system is not None
    assert system.node.gpu.id == recorded["system"]["gpu"] == "H200-SXM-141GB"
    assert system.node.gpus == 1 and system.node.scale_up.kind == "pcie"
    assert system_from_dict(recorded["system"], db.gpu).node == system.node
