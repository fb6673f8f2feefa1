"""The collectives of one step as `plan` prices them, and what a placement costs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from linkscope.advise.placement import Parallelism, place
from linkscope.advise.placement_cost import REFERENCE_BYTES, price_placement, reference_items, step_items
from linkscope.hardware.loader import load_db
from linkscope.model.step.compute import compute_constants
from linkscope.model.step.layout import Layout
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.step.train import BF16_BYTES, Job
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


def test_a_group_of_one_rank_costs_nothing_and_tp_across_nodes_costs_more(job: Job) -> None:
    system = load_db([]).systems["dgx-h100"].with_nodes(2)
    tiers = comm_tiers(system)
    par = Parallelism(tp=8, pp=1, dp=2)
    items = step_items(job, replace(LAYOUT, pp=1, dp=2))
    inside = price_placement(place(system, par, ("tp", "cp", "dp", "pp")), tiers, items)
    across = price_placement(place(system, par, ("cp", "dp", "pp", "tp")), tiers, items)
    assert inside.dims["pp"].time_s == 0.0 and inside.dims["pp"].limit == "none"
    assert inside.dims["tp"].nodes == 1 and across.dims["tp"].nodes == 2
    assert across.dims["tp"].time_s > inside.dims["tp"].time_s
    assert inside.critical_s == pytest.approx(sum(inside.dims[d].time_s for d in ("tp", "cp", "pp")))
