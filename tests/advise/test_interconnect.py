"""Seed 001 in one table: the same GPU and job on every interconnect, each at the price of the closest real
offering (or the user's)."""

from __future__ import annotations

import pytest

from linkscope.advise.bookable import GpuRequest
from linkscope.advise.infer import InferRequest
from linkscope.advise.interconnect import InterconnectComparison, VariantResult, compare_infer, compare_train
from linkscope.advise.train import TrainRequest, advise_train
from linkscope.advise.variants import rack_domain, scale_out_variant, scale_up_variant, variants
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.step.transformer import load_model


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db([])


def _compare(db: HardwareDB, offering: str, gpus: int, model: str = "llama2-13b",
             price: float | None = None) -> InterconnectComparison:
    request = TrainRequest(model=load_model(model), tokens=1e10, global_batch=128, seq_len=4096,
                           gpus=GpuRequest(gpus=gpus))
    plan = advise_train(request, [db.offerings[offering]]).feasible[0]
    return compare_train(request, plan, db.offerings[offering], db, price)


def _find(comparison: InterconnectComparison, up: str, out: str) -> VariantResult:
    return next(v for v in comparison.variants if v.scale_up_class == up and v.fabric == out)


@pytest.mark.parametrize("offering", ["aws/p5.48xlarge", "azure/Standard_ND96amsr_A100_v4", "gcp/a2-highgpu-8g"])
def test_nvswitch_and_infiniband_are_never_slower_than_pcie_and_tcp(db: HardwareDB, offering: str) -> None:
    comparison = _compare(db, offering, 32)
    best, worst = _find(comparison, "nvswitch", "infiniband"), _find(comparison, "pcie", "tcp")
    assert best.time_to_train_s <= worst.time_to_train_s  # type: ignore[operator]
    assert best.tokens_per_s_per_gpu >= worst.tokens_per_s_per_gpu  # type: ignore[operator]


def test_every_scale_up_kind_meets_every_fabric_across_nodes(db: HardwareDB) -> None:
    comparison = _compare(db, "aws/p5.48xlarge", 16)
    offered = comparison.variants[0]
    assert offered.as_offered and (offered.scale_up_class, offered.fabric) == ("nvswitch", "efa")
    pairs = {(v.scale_up_class, v.fabric) for v in comparison.variants}
    # H100 has no rack-scale NVLink domain in the catalog, so three kinds inside the node.
    assert pairs == {(u, f) for u in ("pcie", "nvlink-mesh", "nvswitch") for f in ("infiniband", "roce", "efa", "tcp")}
    assert len(comparison.variants) == 12 and all(v.gpus == 16 for v in comparison.variants)
    for v in comparison.variants:
        assert v.cost_usd == pytest.approx(v.price.usd_per_gpu_hour * 16 * v.time_to_train_s / 3600)  # type: ignore[operator]
    assert any("socket transport" in note for note in comparison.notes)


def test_tcp_is_slower_than_infiniband_on_a_network_bound_job(db: HardwareDB) -> None:
    # 8 x 400 Gbit/s over NCCL's sockets carries 48 GB/s a node, not 0.6 of InfiniBand's 384: a data-parallel job
    # of 16 nodes on a small batch waits for it.
    comparison = _compare(db, "coreweave/hgx-h100", 128, model="llama2-7b")
    ib, tcp = _find(comparison, "nvswitch", "infiniband"), _find(comparison, "nvswitch", "tcp")
    assert tcp.time_to_train_s > 1.3 * ib.time_to_train_s  # type: ignore[operator]


def test_each_variant_is_priced_as_the_closest_real_offering(db: HardwareDB) -> None:
    comparison = _compare(db, "aws/p5.48xlarge", 16)
    roce = _find(comparison, "nvswitch", "roce").price
    assert roce.source == "oci/BM.GPU.H100.8" and roce.match in ("same GPU, scale-up and network", "price unconfirmed")
    assert roce.usd_per_gpu_hour == pytest.approx(db.offerings["oci/BM.GPU.H100.8"].price_per_gpu_hour)
    pcie = _find(comparison, "pcie", "infiniband").price
    assert db.offerings[pcie.source].system.node.scale_up.kind == "pcie"
    mesh = _find(comparison, "nvlink-mesh", "infiniband").price
    assert "no NVLink-mesh offering of H100" in mesh.match and mesh.source == "aws/p5.48xlarge"
    given = _compare(db, "aws/p5.48xlarge", 16, price=2.0)
    assert {v.price.usd_per_gpu_hour for v in given.variants} == {2.0}


def test_one_node_compares_only_the_inside_of_the_node(db: HardwareDB) -> None:
    comparison = _compare(db, "aws/p5.48xlarge", 8, model="llama2-7b")
    assert len(comparison.variants) == 3
    assert any("plays no part" in note for note in comparison.notes)
    assert _find(comparison, "nvswitch", "efa").time_to_train_s <= _find(comparison, "pcie", "efa").time_to_train_s  # type: ignore[operator]


def test_a_family_sold_in_a_rack_gets_a_rack_scale_variant(db: HardwareDB) -> None:
    b200 = db.offerings["coreweave/hgx-b200"].system.with_nodes(8)
    rack = [v for v in variants(b200, db, fabrics=True) if v.scale_up_class == "rack"]
    assert rack and all(v.system.gpus == 64 and v.system.node.scale_up.domain_size == 64 for v in rack)
    assert rack_domain(db.offerings["aws/p5.48xlarge"].system.node, db) is None
    served = [v for v in variants(b200.with_nodes(1), db, fabrics=False, keep_gpus=False)
              if v.scale_up_class == "rack"]
    assert served[0].system.node.gpus == 72


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


def test_seed_001_nvswitch_serves_more_per_gpu_than_the_mesh_at_tp2(db: HardwareDB) -> None:
    request = InferRequest(load_model("llama3.1-70b"), 30.0, input_tokens=8192, output_tokens=256, tp=2)
    comparison = compare_infer(request, db.offerings["nebius/gpu-h200-sxm_8gpu-128vcpu-1600gb"], db)
    nvswitch, mesh = comparison.variants[0], _find(comparison, "nvlink-mesh", "infiniband")
    assert nvswitch.as_offered and nvswitch.tp == mesh.tp == 2
    assert (mesh.tokens_per_s_per_user or 0.0) >= 30.0 and (nvswitch.tokens_per_s_per_user or 0.0) >= 30.0
    # A TP pair gets 1/7 of the mesh's NVLink, so each decode step's all-reduces take longer and fewer users fit
    # the budget: NVSwitch serves a larger batch and more tokens per GPU (the direction the seed reports).
    assert nvswitch.tokens_per_s_per_gpu > 1.1 * mesh.tokens_per_s_per_gpu  # type: ignore[operator]
    assert nvswitch.batch > mesh.batch  # type: ignore[operator]
    assert any("plays no part" in note for note in comparison.notes)


def test_when_every_variant_serves_at_tp1_the_rows_repeat_at_tp2(db: HardwareDB) -> None:
    request = InferRequest(load_model("llama2-7b"), 20.0, input_tokens=512, output_tokens=128)
    comparison = compare_infer(request, db.offerings["aws/p5.48xlarge"], db, price_per_gpu_hour=3.0)
    free = [v for v in comparison.variants if not v.forced_tp]
    held = [v for v in comparison.variants if v.forced_tp]
    assert {v.tp for v in free} == {1} and {v.tp for v in held} == {2} and len(free) == len(held)
    assert all(v.usd_per_million_tokens == pytest.approx(3.0 / (v.tokens_per_s_per_gpu * 3600) * 1e6)  # type: ignore[operator]
               for v in comparison.variants)
