"""The what-if table: the winner's job on other interconnects, at the winner's price."""

from __future__ import annotations

import pytest

from linkscope.advise.bookable import GpuRequest
from linkscope.advise.interconnect import compare_interconnect, scale_out_variant, scale_up_variant
from linkscope.advise.train import TrainRequest, advise_train
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.step.transformer import load_model


@pytest.fixture
def db() -> HardwareDB:
    return load_db([])


def _compare(db: HardwareDB, offering: str, gpus: int, model: str = "llama2-13b"):  # type: ignore[no-untyped-def]
    request = TrainRequest(model=load_model(model), tokens=1e10, global_batch=128, seq_len=4096,
                           gpus=GpuRequest(gpus=gpus))
    winner = advise_train(request, [db.offerings[offering]]).feasible[0]
    return compare_interconnect(request, winner, db.offerings[offering], db)


def _find(comparison, up: str, out: str):  # type: ignore[no-untyped-def]
    return next(v for v in comparison.variants[1:] if v.scale_up.startswith(up) and v.scale_out.startswith(out))


@pytest.mark.parametrize("offering", ["aws/p5.48xlarge", "azure/Standard_ND96amsr_A100_v4", "gcp/a2-highgpu-8g"])
def test_nvswitch_and_infiniband_are_never_slower_than_pcie_and_tcp(db: HardwareDB, offering: str) -> None:
    comparison = _compare(db, offering, 32)
    best, worst = _find(comparison, "NVSwitch", "IB"), _find(comparison, "PCIe", "TCP")
    assert best.time_to_train_s <= worst.time_to_train_s
    assert best.cost_usd is None or best.cost_usd <= worst.cost_usd


def test_every_scale_up_kind_meets_every_fabric_across_nodes(db: HardwareDB) -> None:
    comparison = _compare(db, "aws/p5.48xlarge", 16)
    assert comparison.variants[0].as_offered
    pairs = {(v.scale_up.split()[0], v.scale_out.split()[0]) for v in comparison.variants[1:]}
    assert pairs == {(u, f) for u in ("PCIe", "NVLink", "NVSwitch") for f in ("IB", "RoCE", "EFA", "TCP")}
    # One price for every variant: cost moves with time only.
    base = comparison.variants[0]
    for v in comparison.variants[1:]:
        assert v.cost_usd / v.time_to_train_s == pytest.approx(base.cost_usd / base.time_to_train_s)
        assert v.time_change == pytest.approx(v.time_to_train_s / base.time_to_train_s - 1)


def test_one_node_compares_only_the_inside_of_the_node(db: HardwareDB) -> None:
    comparison = _compare(db, "aws/p5.48xlarge", 8, model="llama2-7b")
    assert len(comparison.variants) == 4
    assert any("plays no part" in note for note in comparison.notes)
    pcie = _find(comparison, "PCIe", "")
    nvswitch = _find(comparison, "NVSwitch", "")
    assert nvswitch.time_to_train_s <= pcie.time_to_train_s


def test_variants_keep_the_nic_rate_and_gpus_without_nvlink_get_no_nvlink(db: HardwareDB) -> None:
    node = db.offerings["aws/p5.48xlarge"].system.node
    tcp = scale_out_variant(node, "tcp")
    assert (tcp.nics, tcp.nic_gbit_per_s, tcp.gpudirect_rdma) == (32, 100.0, False)
    assert scale_out_variant(node, "infiniband").gpudirect_rdma
    mesh = scale_up_variant(node, "nvlink-mesh", db)
    assert mesh is not None and mesh.kind == "nvlink-mesh" and mesh.bw_gb_per_s == node.scale_up.bw_gb_per_s
    l40s = db.offerings["aws/g6e.48xlarge"].system.node
    assert scale_up_variant(l40s, "nvswitch", db) is None
    lonely = db.offerings["lambda/gpu_8x_h100_sxm5"].system.node
    assert scale_out_variant(lonely, "infiniband").nics == 8
