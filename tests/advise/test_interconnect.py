"""Seed 001 in one table: the same GPU and job on every interconnect. Training rows are plans `advise` itself
ranks (or say why none exists); serving rows are priced as the closest real offering (or at the user's price)."""

from __future__ import annotations

import pytest

from linkscope.advise.bookable import GpuRequest
from linkscope.advise.infer import InferRequest
from linkscope.advise.interconnect import InterconnectComparison, VariantResult, compare_infer, compare_train
from linkscope.advise.train import TrainAdvice, TrainRequest, advise_train
from linkscope.advise.variants import rack_domain, scale_out_variant, scale_up_variant, variants
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.step.transformer import load_model


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db([])


def _advice(db: HardwareDB, offering: str, gpus: int, model: str = "llama2-13b",
            gpu: str | None = None) -> TrainAdvice:
    """`advise train` over every offering of the GPU's family (or of `gpu` exactly)."""
    family = db.offerings[offering].system.node.gpu.family_name
    offerings = [o for o in db.offerings.values()
                 if (o.system.node.gpu.id == gpu if gpu else o.system.node.gpu.family_name == family)]
    request = TrainRequest(model=load_model(model), tokens=1e10, global_batch=128, seq_len=4096,
                           gpus=GpuRequest(gpus=gpus))
    return advise_train(request, offerings)


def _compare(db: HardwareDB, offering: str, gpus: int, model: str = "llama2-13b",
             price: float | None = None) -> InterconnectComparison:
    advice = _advice(db, offering, gpus, model)
    plan = next(p for p in advice.plans if p.offering == offering and p.gpus == gpus)
    return compare_train(advice.request, plan, db.offerings[offering], db, price, advice)


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
        assert v.time_to_train_s is not None and v.time_to_train_s > 0
        if v.offering is not None:
            assert v.cost_usd == pytest.approx(v.price.usd_per_gpu_hour * 16 * v.time_to_train_s / 3600)  # type: ignore[operator]
        else:
            assert v.cost_usd is None and v.price.usd_per_gpu_hour is None and v.price.match.startswith("no ")
    assert any("socket transport" in note for note in comparison.notes)


def test_tcp_is_slower_than_infiniband_on_a_network_bound_job(db: HardwareDB) -> None:
    # 8 x 400 Gbit/s over NCCL's sockets carries 48 GB/s a node, not 0.6 of InfiniBand's 384: a data-parallel job
    # of 16 nodes on a small batch waits for it. (One price: every row is the what-if, TCP the socket transport;
    # the plan advise ranks for TCP is GCP's GPUDirect-TCPXO, a faster transport.)
    comparison = _compare(db, "coreweave/hgx-h100", 128, model="llama2-7b", price=3.0)
    ib, tcp = _find(comparison, "nvswitch", "infiniband"), _find(comparison, "nvswitch", "tcp")
    assert tcp.time_to_train_s > 1.3 * ib.time_to_train_s  # type: ignore[operator]


def test_each_training_row_is_a_plan_advise_ranks_or_says_why_none_exists(db: HardwareDB) -> None:
    advice = _advice(db, "aws/p5.48xlarge", 16)
    plan = next(p for p in advice.plans if p.offering == "aws/p5.48xlarge")
    comparison = compare_train(advice.request, plan, db.offerings["aws/p5.48xlarge"], db, None, advice)
    ranked = {(p.offering, p.gpus): p for p in advice.plans}
    for v in comparison.variants:
        if v.offering is None:
            assert v.cost_usd is None and v.price.usd_per_gpu_hour is None and v.price.match.startswith("no ")
            continue
        # The row is advise's own plan: its offering, GPUs, time and cost, of the variant's kind.
        own = ranked[(v.offering, v.gpus)]
        assert (v.time_to_train_s, v.cost_usd, v.parallelism) == (own.time_to_train_s, own.cost_usd, own.parallelism)
        node = db.offerings[v.offering].system.node
        assert own.gpu == plan.gpu and node.scale_out.fabric == v.fabric
        assert v.price.source == v.offering and v.price.usd_per_gpu_hour == db.offerings[v.offering].price_per_gpu_hour
    roce = _find(comparison, "nvswitch", "roce")
    assert roce.offering is not None and db.offerings[roce.offering].system.node.scale_out.fabric == "roce"
    mesh = _find(comparison, "nvlink-mesh", "infiniband")
    assert mesh.offering is None and "no H100-SXM5-80GB with NVLink-mesh among the offerings searched" in \
        mesh.price.match
    given = _compare(db, "aws/p5.48xlarge", 16, price=2.0)
    assert {v.price.usd_per_gpu_hour for v in given.variants} == {2.0}


def test_a_variant_no_bookable_offering_runs_is_not_priced_at_one(db: HardwareDB) -> None:
    # The case: crusoe sells A100 80GB with NVSwitch and InfiniBand at $2.30/GPU-h, but its NIC rate is
    # unknown, so advise cannot plan 8 nodes of it; the NVSwitch + IB row is the plan advise does rank there.
    advice = _advice(db, "aws/p4de.24xlarge", 64, model="llama2-70b", gpu="A100-SXM4-80GB")
    crusoe = next(r for r in advice.rows if r.offering == "crusoe/a100-80gb-sxm-ib.8x")
    assert not crusoe.feasible and "NIC rate unknown" in (crusoe.reason or "")
    first = advice.feasible[0]
    comparison = compare_train(advice.request, first, db.offerings[first.offering], db, None, advice)
    ib = _find(comparison, "nvswitch", "infiniband")
    assert ib.offering is not None and ib.offering != "crusoe/a100-80gb-sxm-ib.8x"
    assert ib.cost_usd == next(p.cost_usd for p in advice.plans if p.offering == ib.offering and p.gpus == 64)
    assert all(v.price.source != "crusoe/a100-80gb-sxm-ib.8x" for v in comparison.variants)
    ranked = {p.offering for p in advice.plans}
    assert all(v.offering in ranked or (v.offering is None and v.cost_usd is None) for v in comparison.variants)


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


def test_every_row_with_an_mfu_names_its_peak(db: HardwareDB) -> None:
    comparison = _compare(db, "coreweave/hgx-h100", 16, price=3.0)
    h100 = db.offerings["coreweave/hgx-h100"].system.node.gpu
    rows = [v for v in comparison.variants if v.mfu]
    assert rows
    for v in rows:
        assert v.mfu_precision == "bf16" and v.mfu_peak_tflops == h100.dense_tflops("bf16")
        assert 0 < (v.mfu or 0) < 1
