"""`plan` and `predict train` are one step model: the rank order only moves groups between a node and the network.

Over offerings (InfiniBand, EFA, GPUDirect-TCPX, AMD), dense and MoE models, node counts and every rank order:
the plan's step is never below the step's compute, equals `predict train` in Megatron-Core's order, and in any
other order differs from it by exactly the change in what the groups (TP, CP, PP, DP, EP) expose.
"""

from __future__ import annotations

import itertools

import pytest

from linkscope.advise.plan import PlanRequest, make_plan, searched_parallelism, tp_first_orders
from linkscope.hardware.loader import load_db
from linkscope.model.calibration.systems import resolve
from linkscope.model.step.job import Job, batch_and_length
from linkscope.model.step.layout import MEGATRON_ORDER, layouts_of
from linkscope.model.step.predict import predict_train_on
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.step_collectives import exposed_per_group_s
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import load_model

CASES = [
    ("gcp/a3-highgpu-8g", "llama2-13b", 2), ("gcp/a3-highgpu-8g", "mixtral-8x7b", 16),
    ("aws/p5.48xlarge", "llama2-70b", 4), ("aws/p5.48xlarge", "mixtral-8x7b", 2),
    ("dgx-h100", "llama2-7b", 1), ("dgx-h100", "qwen3-30b-a3b", 4), ("dgx-a100", "llama2-13b", 4),
    ("mi300x-8x", "mixtral-8x7b", 2),
]
ORDERS = list(itertools.permutations(MEGATRON_ORDER))


@pytest.fixture(scope="module")
def db():  # type: ignore[no-untyped-def]
    return load_db([])


def _job(model: str) -> Job:
    spec = load_model(model)
    batch, length = batch_and_length(spec.seq_len, None, None)
    return Job(spec, batch, length)


@pytest.mark.parametrize("system_id, model, nodes", CASES)
def test_plan_is_predict_train_plus_the_priced_moves(db, system_id: str, model: str, nodes: int) -> None:  # type: ignore[no-untyped-def]
    resolved, job = resolve(system_id, db).with_nodes(nodes), _job(model)
    par = searched_parallelism(resolved, nodes, job, LayoutRequest())
    result = make_plan(PlanRequest(resolved, nodes, par, job=job))
    predicted = predict_train_on(job, resolved, LayoutRequest())
    assert result.megatron_cost is not None and result.step_time_s is not None and result.layout is not None
    # Megatron-Core's order is `predict train`'s answer, to the last digit.
    assert result.megatron_cost.step_time_s == pytest.approx(predicted.step_time_s, rel=1e-12)
    assert result.step_time_s <= predicted.step_time_s
    assert result.step_time_s == pytest.approx(predicted.step_time_s + sum(result.moves().values()), rel=1e-9)
    system, lay = resolved.system, layouts_of(result.layout)
    with resolved.computing():
        by_order = {o: estimate_steps(job, system, lay, resolved.tiers, o) for o in ORDERS}
    base = by_order[MEGATRON_ORDER]
    base_exposed = exposed_per_group_s(base, lay)
    for order, est in by_order.items():
        step = float(est.step_time_s[0])
        assert step >= float(est.compute_s[0]) > 0
        exposed = exposed_per_group_s(est, lay)
        moved = sum(exposed[g] - base_exposed[g] for g in exposed)
        assert step - float(base.step_time_s[0]) == pytest.approx(moved, rel=1e-9, abs=1e-9 * step), order
    # The plan's choice is the fastest order with TP first, priced as the step model prices it.
    fastest = min(float(by_order[o].step_time_s[0]) for o in tp_first_orders())
    assert result.step_time_s == pytest.approx(fastest, rel=1e-12)
    assert ("ep" in result.cost.groups) == (result.layout.ep > 1)


def test_the_issues_plan_equals_predict_train(db) -> None:  # type: ignore[no-untyped-def]
    # Megatron's order hides the pipeline's cross-node sends behind the interleaved schedule; moving PP inside the
    # node saves nothing, and moving it there spreads nothing else: the plan is predict train's step.
    resolved, job = resolve("gcp/a3-highgpu-8g", db).with_nodes(2), _job("llama2-13b")
    par = searched_parallelism(resolved, 2, job, LayoutRequest())
    result = make_plan(PlanRequest(resolved, 2, par, job=job))
    predicted = predict_train_on(job, resolved, LayoutRequest())
    assert result.step_time_s == pytest.approx(predicted.step_time_s, rel=1e-12)
    assert result.step_time_s >= predicted.breakdown["compute_s"]


def test_an_order_that_spreads_the_experts_is_charged_their_all_to_all(db) -> None:  # type: ignore[no-untyped-def]
    resolved, job = resolve("gcp/a3-highgpu-8g", db).with_nodes(16), _job("mixtral-8x7b")
    par = searched_parallelism(resolved, 16, job, LayoutRequest())
    megatron = make_plan(PlanRequest(resolved, 16, par, job=job, order=MEGATRON_ORDER))
    spread = make_plan(PlanRequest(resolved, 16, par, job=job, order=("tp", "cp", "pp", "dp")))
    assert megatron.cost.groups["ep"].nodes == 1 and spread.cost.groups["ep"].nodes > 1
    assert spread.cost.groups["ep"].time_s > megatron.cost.groups["ep"].time_s
    assert spread.step_time_s is not None and megatron.step_time_s is not None
    assert spread.step_time_s > megatron.step_time_s
    assert spread.moves()["ep"] > 0


def test_an_order_that_keeps_the_pipeline_in_the_node_wins_by_its_moves(db) -> None:  # type: ignore[no-untyped-def]
    # Plain 1F1B waits for every cross-node send over TCPX; with the pipeline inside the node and the (overlapped)
    # gradient reduction across, the step is shorter by exactly PP's saving less DP's extra exposure.
    from linkscope.advise.placement import Parallelism

    resolved, job = resolve("gcp/a3-highgpu-8g", db).with_nodes(2), _job("llama2-13b")
    given = LayoutRequest(tp=1, pp=2, dp=8, interleave=1, zero=1)
    result = make_plan(PlanRequest(resolved, 2, Parallelism(tp=1, pp=2, dp=8), job=job, given=given))
    predicted = predict_train_on(job, resolved, given)
    moves = result.moves()
    assert result.placement.order_text == "tp-cp-pp-dp" and set(moves) == {"pp", "dp"}
    assert moves["pp"] < 0 < moves["dp"]
    assert result.step_time_s == pytest.approx(predicted.step_time_s + moves["pp"] + moves["dp"], rel=1e-12)
    assert predicted.breakdown["compute_s"] < result.step_time_s < predicted.step_time_s
