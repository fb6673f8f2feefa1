"""The collectives of one training step, per parallel group."""

from __future__ import annotations

from dataclasses import replace

import pytest

from linkscope.model.step.compute import compute_constants
from linkscope.model.step.layout import Layout
from linkscope.model.step.step_collectives import REFERENCE_BYTES, reference_items, step_items
from linkscope.model.step.job import Job
from linkscope.model.step.train import BF16_BYTES
from linkscope.model.step.transformer import load_model

LAYOUT = Layout(tp=8, pp=2, dp=4, cp=1, micro_batch=2, interleave=1, recompute="none", sequence_parallel=True,
                zero=1)


@pytest.fixture
def job() -> Job:
    return Job(model=load_model("llama2-70b"), global_batch=64, seq_len=4096)


def _counts(items: list[tuple[str, float, float]]) -> dict[str, float]:
    return {op: count for op, _, count in items}


def test_tp_issues_six_gathers_and_four_scatters_per_layer_and_micro_batch(job: Job) -> None:
    per_layer = (80 / 2) * 64 / (4 * 2)  # layers per stage x micro-batches per step
    items = step_items(job, LAYOUT)
    assert _counts(items["tp"]) == {"all_gather": 6 * per_layer, "reduce_scatter": 4 * per_layer}
    (_, size, _), _ = items["tp"]
    assert size == 2 * 4096 * job.model.hidden * BF16_BYTES


def test_full_recompute_replays_the_forward_collectives(job: Job) -> None:
    plain = _counts(step_items(job, LAYOUT)["tp"])
    replayed = _counts(step_items(job, replace(LAYOUT, recompute="full"))["tp"])
    assert replayed["all_gather"] / plain["all_gather"] == pytest.approx(8 / 6)
    assert replayed["reduce_scatter"] / plain["reduce_scatter"] == pytest.approx(6 / 4)


def test_without_sequence_parallelism_tp_all_reduces(job: Job) -> None:
    assert set(_counts(step_items(job, replace(LAYOUT, sequence_parallel=False))["tp"])) == {"all_reduce"}


def test_zero_stages_change_the_data_parallel_collectives(job: Job) -> None:
    c = compute_constants()
    zero0 = step_items(job, replace(LAYOUT, zero=0))["dp"]
    zero1 = step_items(job, LAYOUT)["dp"]
    zero3 = step_items(job, replace(LAYOUT, zero=3))["dp"]
    assert [op for op, _, _ in zero0] == ["all_reduce"]
    assert [op for op, _, _ in zero1] == ["reduce_scatter", "all_gather"]
    gather, scatter = zero3
    per_layer = (80 / 2) * 64 / (4 * 2)
    assert (gather[0], gather[2]) == ("all_gather", 2 * per_layer) and (scatter[0], scatter[2]) == (
        "reduce_scatter", per_layer)
    assert gather[1] == pytest.approx(job.model.layer_params() / 8 * c.weight_bytes)


def test_reference_items_move_the_same_bytes_in_every_group() -> None:
    items = reference_items()
    assert {size for group in items.values() for _, size, _ in group} == {REFERENCE_BYTES}


def test_lora_reduces_adapter_gradients_and_still_gathers_the_frozen_base(job: Job) -> None:
    from linkscope.model.step.peft import Peft, adapter_params_per_layer, base_bytes_per_param
    peft = Peft(rank=16, base_precision="nf4")
    tuned = replace(job, peft=peft)
    per_layer = (80 / 2) * 64 / (4 * 2)
    assert _counts(step_items(tuned, LAYOUT)["tp"]) == {"all_gather": 4 * per_layer, "reduce_scatter": 4 * per_layer}
    (_, full_bytes, _), = step_items(job, replace(LAYOUT, zero=0))["dp"]
    (_, lora_bytes, _), = step_items(tuned, replace(LAYOUT, zero=0))["dp"]
    assert lora_bytes < full_bytes / 100
    gather, scatter = step_items(tuned, replace(LAYOUT, zero=3))["dp"]
    assert gather[1] == pytest.approx(job.model.layer_params() / 8 * base_bytes_per_param(peft))
    assert scatter[1] == pytest.approx(adapter_params_per_layer(job.model, peft) / 8 * compute_constants().grad_bytes)


def test_deepspeed_zero3_gathers_each_weight_matrix_on_its_own(job: Job) -> None:
    # The same bytes per layer in more, smaller collectives: one per weight matrix instead of FSDP's flat unit.
    from linkscope.model.step.train import zero3_collectives

    fsdp = step_items(job, replace(LAYOUT, zero=3))["dp"]
    deepspeed = step_items(replace(job, framework="deepspeed"), replace(LAYOUT, zero=3))["dp"]
    k = zero3_collectives(replace(job, framework="deepspeed"))
    assert k > 1
    for (op, size, times), (op_d, size_d, times_d) in zip(fsdp, deepspeed):
        assert op == op_d and size_d == pytest.approx(size / k) and times_d == pytest.approx(times * k)


def test_data_parallel_traffic_of_an_moe_model_counts_the_gpus_own_experts() -> None:
    m = load_model("mixtral-8x7b")
    job = Job(model=m, global_batch=64, seq_len=4096)
    layout = Layout(tp=1, pp=1, dp=16, micro_batch=1, zero=3, ep=8)
    gather = dict((op, size) for op, size, _ in step_items(job, layout)["dp"])["all_gather"]
    expert = m.expert_params_per_layer()
    own = (m.layer_params() - expert) + expert / 8
    assert gather == pytest.approx(own * compute_constants().weight_bytes)
    # With every expert on every GPU (ep 1) the layer's full weights are gathered.
    full = dict((op, size) for op, size, _ in step_items(job, replace(layout, ep=1))["dp"])["all_gather"]
    assert full == pytest.approx(m.layer_params() * compute_constants().weight_bytes)
