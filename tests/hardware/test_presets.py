"""The named System presets keep their ids and their documented shape."""

from __future__ import annotations

import pytest

from linkscope.hardware.loader import load_db

PRESET_IDS = ["dgx-a100", "dgx-a100-40g", "dgx-h100", "hgx-h200", "hgx-b200", "pcie-l40s", "pcie-4090",
              "bridge-h100-pcie", "p2p-mesh-h200"]


@pytest.fixture(scope="module")
def systems():
    return load_db(include_user=False).systems


def test_all_preset_ids_exist(systems) -> None:
    assert set(PRESET_IDS) <= set(systems)


def test_dgx_a100(systems) -> None:
    node = systems["dgx-a100"].node
    assert (node.gpu.id, node.gpus, node.scale_up.kind, node.scale_up.generation) == \
        ("A100-SXM4-80GB", 8, "nvswitch", "nvlink3")
    assert (node.scale_out.fabric, node.scale_out.nics, node.scale_out.nic_gbit_per_s) == ("infiniband", 8, 200)
    assert node.scale_out.gpudirect_rdma
    assert node.scale_up.in_network_reduction == "none"  # no NVLS before Hopper
    assert systems["dgx-a100-40g"].node.gpu.id == "A100-SXM4-40GB"


def test_dgx_h100_has_nvls_and_ndr(systems) -> None:
    node = systems["dgx-h100"].node
    assert node.gpu.id == "H100-SXM5-80GB"
    assert node.scale_up.in_network_reduction == "nvls"
    assert node.scale_out.total_gbit_per_s == 3200
    assert node.scale_out_gb_per_s_per_gpu() == pytest.approx(50.0)


def test_hgx_h200_is_dgx_h100_with_h200(systems) -> None:
    h100, h200 = systems["dgx-h100"].node, systems["hgx-h200"].node
    assert h200.gpu.id == "H200-SXM-141GB"
    assert (h200.scale_up, h200.scale_out) == (h100.scale_up, h100.scale_out)


def test_b200_and_pcie_presets(systems) -> None:
    assert systems["hgx-b200"].node.scale_up.generation == "nvlink5"
    assert systems["hgx-b200"].node.scale_out.nic_gbit_per_s == 400
    for preset, gpu in (("pcie-l40s", "L40S"), ("pcie-4090", "RTX-4090")):
        node = systems[preset].node
        assert (node.gpu.id, node.gpus, node.scale_up.kind, node.scale_up.generation) == (gpu, 8, "pcie", "pcie4")
        assert not node.scale_up.is_nvlink


def test_bridge_joins_two_pcie_h100(systems) -> None:
    node = systems["bridge-h100-pcie"].node
    assert (node.gpu.id, node.gpus, node.scale_up.kind, node.scale_up.domain_size) == \
        ("H100-PCIe-80GB", 2, "nvlink-bridge", 2)
    assert node.scale_up.bw_gb_per_s == 300  # 600 GB/s bidirectional bridge


def test_mesh_splits_bandwidth_over_seven_peers_while_nvswitch_does_not(systems) -> None:
    mesh, switch = systems["p2p-mesh-h200"].node.scale_up, systems["hgx-h200"].node.scale_up
    assert mesh.is_mesh and not switch.is_mesh
    # 900 GB/s bidirectional split into 7 links of about 128 GB/s (64 per direction).
    assert 2 * mesh.pair_bw_gb_per_s() == pytest.approx(128.6, abs=0.5)
    assert switch.pair_bw_gb_per_s() == 450
    assert switch.pair_bw_gb_per_s() / mesh.pair_bw_gb_per_s() == pytest.approx(7.0)


def test_with_gpus_counts_whole_nodes(systems) -> None:
    dgx = systems["dgx-h100"]
    assert dgx.with_gpus(64).nodes == 8
    assert dgx.with_gpus(64).gpus == 64
    with pytest.raises(ValueError):
        dgx.with_gpus(12)


AMD_PRESETS = {"mi300x-8x": ("MI300X", "cdna3"), "mi325x-8x": ("MI325X", "cdna3"), "mi350x-8x": ("MI350X", "cdna4"),
               "mi355x-8x": ("MI355X", "cdna4")}


@pytest.mark.parametrize("preset", sorted(AMD_PRESETS))
def test_amd_presets_are_eight_gpus_on_an_infinity_fabric_mesh(systems, preset: str) -> None:
    system = systems[preset]
    gpu, arch = AMD_PRESETS[preset]
    node = system.node
    assert (node.gpu.id, node.gpu.family_name, node.gpu.vendor, node.gpu.arch, node.gpus) == (gpu, gpu, "amd", arch, 8)
    # A full mesh without a switch: each GPU's bandwidth is its 7 links, one per peer.
    assert node.scale_up.kind == "xgmi-mesh" and node.scale_up.is_mesh and node.scale_up.links_per_gpu == 7
    assert node.scale_out.nics == 8 and node.scale_out.nic_gbit_per_s == 400 and node.scale_out.gpudirect_rdma
    assert system.source and system.as_of


def test_cdna4_doubles_cdna3s_peak_and_link_rate(systems) -> None:
    mi300, mi355 = systems["mi300x-8x"].node, systems["mi355x-8x"].node
    assert mi355.gpu.dense_tflops("bf16") / mi300.gpu.dense_tflops("bf16") == pytest.approx(1.92, abs=0.01)
    assert mi355.scale_up.bw_gb_per_s > mi300.scale_up.bw_gb_per_s


@pytest.mark.parametrize("preset, gpu", [("hgx-b300", "B300-SXM-288GB"), ("gb300-nvl72", "GB300")])
def test_blackwell_ultra_presets(systems, preset: str, gpu: str) -> None:
    node = systems[preset].node
    assert node.gpu.id == gpu and node.scale_out.nic_gbit_per_s == 800 and node.scale_up.in_network_reduction == "nvls"
