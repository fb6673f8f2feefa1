"""Disaggregated serving: where the pools sit decides the KV path; TTFT in pieces; rate matching; bad input."""

from __future__ import annotations

from dataclasses import replace

import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.step.disagg import (DisaggJob, Pool, check_job, colocated, place, predict_disagg,
                                         scale_up_domain_gpus, summary)
from linkscope.model.step.kv_transfer import KvOptions, link
from linkscope.model.step.transformer import model_presets


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def _job(p: int, d: int, tp_p: int, tp_d: int, transport: str = "auto", **kv) -> DisaggJob:
    return DisaggJob(model_presets()["llama3-70b"], 8192, 512, Pool(p, tp_p), Pool(d, tp_d),
                     kv=KvOptions(transport=transport, **kv))


def _answer(system, job, **kw):
    return predict_disagg(job, system, comm_tiers(system), **kw)


def test_pools_in_one_node_use_nvlink_and_pools_on_two_nodes_cross_the_network(db) -> None:
    one = db.systems["dgx-h100"]
    two = one.with_nodes(2)
    assert place(_job(4, 4, 4, 4), one).path == "nvlink"
    assert place(_job(8, 8, 8, 8), two).path == "rdma"
    # Each node holding one prefill and one decode instance keeps the handoff on NVLink across nodes.
    assert place(_job(8, 8, 4, 4), two).path == "nvlink"
    tcp = db.systems["pcie-l40s"].with_nodes(2)
    assert place(_job(8, 8, 8, 8), tcp).path == "tcp"


def test_the_domain_predicate_is_the_nvlink_domain(db) -> None:
    assert scale_up_domain_gpus(db.systems["dgx-h100"]) == 8
    rack = db.systems["gb200-nvl72"]
    assert rack.node.gpus == 4 and scale_up_domain_gpus(rack) == 72


def test_pools_on_other_trays_of_one_rack_stay_on_nvlink(db) -> None:
    rack = db.systems["gb200-nvl72"]
    job = _job(8, 8, 4, 8)
    check_job(job, rack)  # TP 8 spans two trays of the domain, which NCCL joins over NVLink
    assert place(job, rack).path == "nvlink"


def test_nvlink_between_nodes_without_a_domain_is_refused(db) -> None:
    with pytest.raises(UserError, match="do not share an NVLink domain") as err:
        place(_job(8, 8, 8, 8, "nvlink"), db.systems["dgx-h100"].with_nodes(2))
    assert err.value.field == "kv_transport"
    with pytest.raises(UserError, match="no NVLink"):
        place(_job(4, 4, 4, 4, "nvlink"), db.systems["pcie-l40s"])


@pytest.mark.parametrize(("job", "field", "words"), [
    (_job(8, 8, 8, 8), "decode_gpus", "larger than"),
    (_job(6, 2, 4, 2), "prefill_tp", "does not divide the prefill pool of 6"),
    (_job(4, 4, 4, 16), "decode_tp", "spans nodes"),
    (_job(4, 4, 4, 4, block_tokens=0), "block_tokens", "between 1 and the context"),
    (_job(4, 4, 4, 4, block_tokens=9000), "block_tokens", "between 1 and the context of 8704"),
])
def test_bad_pools_and_pages_name_their_flag(db, job: DisaggJob, field: str, words: str) -> None:
    with pytest.raises(UserError, match=words) as err:
        _answer(db.systems["dgx-h100"], job)
    assert err.value.field == field


def test_rdma_on_a_tcp_network_is_refused(db) -> None:
    with pytest.raises(UserError, match="no GPUDirect RDMA"):
        place(_job(8, 8, 8, 8, "rdma"), db.systems["pcie-l40s"].with_nodes(2))


def test_ttft_is_its_pieces_and_the_slower_link_shows_in_it(db) -> None:
    two = db.systems["dgx-h100"].with_nodes(2)
    rdma = summary(_answer(two, _job(8, 8, 8, 8), batch=32), two)
    tcp = summary(_answer(two, _job(8, 8, 8, 8, "tcp"), batch=32), two)
    pieces = ("prefill_queue_s", "prefill_s", "kv_transfer_s", "decode_queue_s", "first_decode_step_s")
    assert rdma["ttft_s"] == pytest.approx(sum(rdma[k] for k in pieces))
    assert all(rdma[k] >= 0 for k in pieces) and rdma["prefill_s"] > 0 and rdma["kv_transfer_s"] > 0
    assert tcp["kv_transfer_s"] > 5 * rdma["kv_transfer_s"]
    assert tcp["tpot_s"] == rdma["tpot_s"]


def test_decode_steps_carry_no_prefill_so_tpot_beats_colocated_at_the_same_batch(db) -> None:
    two = db.systems["dgx-h100"].with_nodes(2)
    data = summary(_answer(two, _job(8, 8, 8, 8), batch=32), two)
    assert data["colocated"]["batch"] == 32
    assert data["tpot_s"] < data["colocated"]["tpot_s"]


def test_more_prefill_gpus_move_the_bottleneck_to_decode(db) -> None:
    two = db.systems["dgx-h100"].with_nodes(2)
    few = _answer(two, _job(4, 8, 4, 8), batch=64).plan
    many = _answer(two, _job(12, 4, 4, 4), batch=64).plan
    assert few.bottleneck == "prefill"
    assert many.capacity_per_s["prefill"] > few.capacity_per_s["prefill"]
    assert many.bottleneck in ("decode", "kv")
    util = few.utilisation(few.rate_per_s)
    assert util["prefill"] == pytest.approx(1.0) and util["decode"] <= 1.0


def test_a_budget_picks_the_decode_batch_and_a_load_past_capacity_is_refused(db) -> None:
    two = db.systems["dgx-h100"].with_nodes(2)
    answer = _answer(two, _job(8, 8, 8, 8), budget=30.0)
    assert 1.0 / answer.plan.tpot_s >= 30.0 and answer.plan.batch > 1
    with pytest.raises(UserError, match="more than the plan serves") as err:
        _answer(two, _job(8, 8, 8, 8), budget=30.0, qps=answer.plan.rate_per_s * 2)
    assert err.value.field == "qps"
    with pytest.raises(UserError, match="no decode batch meets"):
        _answer(two, _job(8, 8, 8, 8), budget=10_000.0)


def test_colocated_serving_uses_the_same_gpus(db) -> None:
    one = db.systems["dgx-h100"]
    data = summary(_answer(one, _job(4, 4, 4, 4), budget=20.0), one)
    c = data["colocated"]
    assert c["instances"] * c["tp"] <= 8
    assert data["verdict"]["winner"] in ("disaggregated", "colocated")
    assert data["verdict"]["speedup"] == pytest.approx(data["tokens_per_s_per_gpu"] / c["tokens_per_s_per_gpu"])


def test_wide_ep_decode_pool_counts_its_attention_replicas(db) -> None:
    rack = db.systems["gb200-nvl72"]
    job = DisaggJob(model_presets()["deepseek-v3"], 8192, 256, Pool(16, 4), Pool(16, 1, 16), precision="fp8",
                    kv_precision="fp8")
    check_job(job, rack)
    answer = _answer(rack, job, batch=16)
    assert answer.plan.placement.path == "nvlink"
    assert answer.plan.capacity_per_s["decode"] == pytest.approx(
        16 * 16 / (256 * answer.plan.tpot_s))


def test_colocated_serving_can_run_the_wide_ep_layout_of_an_moe_decode_pool(db) -> None:
    """DeepSeek-V3 in FP8 on one tray of a rack (TP 4) leaves little HBM for a KV cache; colocated serving on
    the same 24 GPUs can spread the experts over 8 GPUs as the decode pool does (TensorRT-LLM's aggregated
    baselines run attention DP with EP too), which serves more at 30 tokens/s per user and says so."""
    rack = db.systems["gb200-nvl72"]
    job = DisaggJob(model_presets()["deepseek-v3"], 4400, 1200, Pool(16, 4), Pool(8, 1, 8), precision="fp8",
                    kv_precision="fp8")
    tiers = comm_tiers(rack)
    wide = colocated(job, rack, tiers, None, 30.0)
    tp_only = colocated(replace(job, decode=Pool(8, 1)), rack, tiers, None, 30.0)
    assert wide is not None and tp_only is not None
    assert (wide.ep, wide.tp, wide.instances) == (8, 1, 24) and tp_only.ep == 1
    assert wide.tokens_per_s_per_gpu > tp_only.tokens_per_s_per_gpu
    # With a batch given, colocated serving runs the decode pool's own layout.
    given = summary(_answer(rack, job, batch=16), rack)["colocated"]
    assert (given["tp"], given["ep"], given["batch"]) == (1, 8, 16)


def test_some_trays_of_a_rack_are_one_domain_and_a_tray_sends_on_its_own_nics(db) -> None:
    """Six trays of a GB200 NVL72 rack (24 GPUs) are part of one NVLink domain: pools of 16 + 8 GPUs hand their
    KV cache over NVLink there as on the whole rack. Forced over RDMA, a GPU sends on its tray's NICs (one
    400 Gb/s ConnectX-7 each), not on the whole domain's that NCCL counts as one node's."""
    rack = db.systems["gb200-nvl72"]
    job = DisaggJob(model_presets()["deepseek-v3"], 4400, 1200, Pool(16, 4), Pool(8, 1, 8), precision="fp8",
                    kv_precision="fp8")
    for trays in (6, 18):
        assert place(job, rack.with_nodes(trays)).path == "nvlink", trays
    tiers = comm_tiers(rack)
    rdma = link(rack, tiers, "rdma", 4)
    # One NIC per GPU: the domain's NIC bandwidth over its 72 GPUs, under a 400 Gb/s port's 50 GB/s.
    assert rdma.gb_per_s == pytest.approx(tiers.nic_node_gb_per_s / rack.nvlink_domain_gpus)
    assert rdma.gb_per_s < 50.0


def test_a_prefill_ep_is_refused(db) -> None:
    job = replace(_job(4, 4, 4, 4), prefill=Pool(4, 4, 8))
    with pytest.raises(UserError, match="decode only"):
        check_job(job, db.systems["dgx-h100"])
