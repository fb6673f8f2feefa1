"""An NVLink domain that spans nodes (GB200 NVL72: 18 trays of 4 GPUs) is priced as one node of its GPUs: the same
job gives the same figures whether the System is one 72-GPU rack or 18 four-GPU trays, and only jobs beyond the
domain cross the scale-out fabric."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.system import System
from linkscope.model.comm.moe import MoeRequest, predict_moe
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.step.infer import InferJob, estimate_inference, tp_options
from linkscope.model.step.job import Job
from linkscope.model.step.search import LayoutRequest, search
from linkscope.model.step.transformer import load_model

SIZES = [8, 65536, 1 << 20, 64 << 20, 1 << 30]


def _rack(tray: System) -> System:
    """The same rack written as one node of 72 GPUs with all 72 NICs (how a rack was modelled before trays)."""
    node = tray.node
    rack = replace(node, gpus=72, scale_out=replace(node.scale_out, nics=node.scale_out.nics * 18))
    return replace(tray, id="rack-as-one-node", node=rack, nodes=1)


@pytest.fixture(scope="module")
def trays() -> System:
    return load_db(include_user=False).systems["gb200-nvl72"]


def test_the_tray_preset_is_18_nodes_of_4_in_one_72_gpu_domain(trays: System) -> None:
    assert (trays.gpus_per_node, trays.nodes, trays.gpus, trays.nvlink_domain_gpus) == (4, 18, 72, 72)
    assert trays.domain_spans_nodes and trays.nodes_per_domain == 18
    assert (trays.nccl_nodes, trays.nccl_node_gpus) == (1, 72)
    assert trays.with_gpus(144).domain_split() == (2, 72)
    # 1,024 GPUs fill 16 racks of 64 (16 trays each), as no split in 15 is even.
    assert trays.with_gpus(1024).domain_split() == (16, 64)
    assert trays.with_gpus(8).domain_split() == (1, 8)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"])
@pytest.mark.parametrize("gpus", [8, 16, 64, 72])
def test_a_job_inside_the_domain_is_priced_alike_as_one_rack_or_18_trays(trays: System, op: str, gpus: int) -> None:
    rack = _rack(trays)
    on_trays = predict_sizes(trays, op, SIZES, gpus)
    on_rack = predict_sizes(rack, op, SIZES, gpus)
    assert [r.time_us for r in on_trays] == pytest.approx([r.time_us for r in on_rack], rel=1e-12)
    assert [r.algorithm for r in on_trays] == [r.algorithm for r in on_rack]
    assert on_trays[0].nodes == gpus // 4 and on_trays[0].nvlink_domains == 1


def test_two_racks_cross_the_scale_out_fabric_and_one_does_not(trays: System) -> None:
    slow = replace(trays, node=replace(trays.node, scale_out=replace(trays.node.scale_out, nic_gbit_per_s=10.0)))
    for gpus, crosses in ((72, False), (144, True)):
        fast_us = predict_sizes(trays, "all_reduce", [1 << 30], gpus)[0].time_us
        slow_us = predict_sizes(slow, "all_reduce", [1 << 30], gpus)[0].time_us
        assert (slow_us > 2 * fast_us) is crosses, gpus
    row = predict_sizes(trays, "all_reduce", [1 << 30], 144)[0]
    assert (row.nodes, row.nvlink_domains) == (36, 2)
    assert predict_sizes(_rack(trays), "all_reduce", [1 << 30], 144)[0].time_us == pytest.approx(row.time_us)


def test_the_tiers_of_a_tray_type_are_the_whole_domain_at_every_node_count(trays: System) -> None:
    tiers = [comm_tiers(trays.with_nodes(n)) for n in (1, 2, 18, 36)]
    assert all(t == tiers[0] for t in tiers)
    assert tiers[0].gpus_per_node == 72 and tiers[0].domain_spans_nodes
    rack = comm_tiers(_rack(trays))
    assert rack.nic_node_gb_per_s == pytest.approx(tiers[0].nic_node_gb_per_s)


def test_training_on_the_domain_is_the_same_on_one_rack_or_18_trays(trays: System) -> None:
    job = Job(model=load_model("llama3-70b"), global_batch=256, seq_len=8192, precision="bf16")
    req = LayoutRequest()
    on_trays, on_rack = search(job, trays, req), search(job, _rack(trays), req)
    assert on_trays.gpus == on_rack.gpus == 64  # 72 has the factor 9: 16 of 18 trays run
    best = on_trays.layouts.row(on_trays.best)
    assert best == on_rack.layouts.row(on_rack.best)
    assert float(on_trays.estimate.step_time_s[on_trays.best]) == pytest.approx(
        float(on_rack.estimate.step_time_s[on_rack.best]), rel=1e-12)
    # TP and EP are searched up to the domain, not the 4-GPU tray.
    assert int(np.max(on_trays.layouts.tp)) == 8


def test_serving_and_moe_keep_tensor_and_expert_parallelism_on_nvlink_across_trays(trays: System) -> None:
    model = load_model("deepseek-v3")
    assert tp_options(model, trays.max_nccl_node_gpus) == tp_options(model, 72)
    job = InferJob(model=model, tp=1, pp=1, input_tokens=1024, output_tokens=256, precision="fp8", ep=64)
    batches = np.asarray([64.0])
    tray_est = estimate_inference(job, trays, batches)
    rack_est = estimate_inference(job, _rack(trays), batches)
    assert float(tray_est.tpot_s[0]) == pytest.approx(float(rack_est.tpot_s[0]), rel=1e-12)
    req = MoeRequest(ep=64, tokens_per_rank=4096, hidden=7168, topk=8, experts=256, precision="fp8",
                     kernel="normal")
    tray_moe, rack_moe = predict_moe(comm_tiers(trays), req), predict_moe(comm_tiers(_rack(trays)), req)
    assert tray_moe.nodes == 1 and tray_moe.dispatch_us == pytest.approx(rack_moe.dispatch_us)


@pytest.mark.parametrize("gpus", [76, 100])
def test_gpus_that_do_not_fill_domains_evenly_are_refused_naming_the_flag(trays: System, gpus: int) -> None:
    with pytest.raises(UserError, match=r"do not spread evenly over NVLink domains of 72 GPUs") as err:
        predict_sizes(trays, "all_reduce", [1 << 20], gpus)
    assert err.value.field == "gpus" and err.value.for_flags().startswith("--gpus: ")
    assert "\n" not in err.value.for_flags()
