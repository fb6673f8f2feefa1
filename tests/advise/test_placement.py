"""`plan`: rank maps on the topology, launcher inputs, and the naive placement's cost."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.advise.launch import host_names, launch_plan
from linkscope.advise.placement import Parallelism, group_spans, naive_order, parse_order, place, rail_pairs
from linkscope.advise.plan import PlanRequest, make_plan
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.system import System
from linkscope.model.calibration.systems import ResolvedSystem
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import load_model


@pytest.fixture
def h100() -> System:
    return load_db([]).systems["dgx-h100"]


def test_tp_groups_stay_inside_one_node(h100: System) -> None:
    p = place(h100.with_nodes(4), Parallelism(tp=8, pp=2, dp=2))
    for dp in range(2):
        for pp in range(2):
            members = (p.coords["dp"] == dp) & (p.coords["pp"] == pp)
            assert len(np.unique(p.node[members])) == 1
            assert sorted(p.gpu[members].tolist()) == list(range(8))
    spans = group_spans(p)
    assert spans["tp"].nodes == 1 and spans["dp"].nodes == 2 and spans["pp"].nodes == 2


def test_the_naive_order_spreads_tp_over_nodes(h100: System) -> None:
    order = parse_order("tp-cp-dp-pp")
    naive = place(h100.with_nodes(4), Parallelism(tp=8, pp=2, dp=2), naive_order(order))
    assert naive.order_text == "cp-dp-pp-tp"
    assert group_spans(naive)["tp"].nodes == 4


def test_pipeline_neighbours_across_nodes_share_the_rail(h100: System) -> None:
    # Two stages per node: odd nodes take their stage blocks in reverse so the crossing stays on one rail.
    p = place(h100.with_nodes(2), Parallelism(tp=2, pp=4, dp=2))
    crossing, same_rail = rail_pairs(p)
    assert crossing == 4 and same_rail == 4
    plan = launch_plan(p, host_names(None, 2))
    assert plan.cuda_visible_devices == {"node0": "0,1,2,3,4,5,6,7", "node1": "4,5,6,7,0,1,2,3"}
    wide = place(h100.with_nodes(4), Parallelism(tp=8, pp=4, dp=1))
    assert rail_pairs(wide) == (24, 24)


def test_launch_plan_has_hostfile_devices_torchrun_and_megatron_sizes(h100: System) -> None:
    p = place(h100.with_nodes(2), Parallelism(tp=8, pp=1, dp=2))
    plan = launch_plan(p, host_names("a,b", 2))
    assert plan.hostfile == "a slots=8\nb slots=8\n"
    assert plan.cuda_visible_devices == {"a": "0,1,2,3,4,5,6,7", "b": "0,1,2,3,4,5,6,7"}
    assert "--nnodes=2 --nproc-per-node=8 --node-rank=1 --master-addr=a" in plan.torchrun[1]
    assert plan.megatron_args.startswith("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 1")
    assert plan.order == "tp-cp-dp-pp"
    with pytest.raises(UserError, match="^hosts: "):
        host_names("a", 2)


def test_rank_numbering_is_node_major_as_torchrun_numbers_it(h100: System) -> None:
    p = place(h100.with_nodes(2), Parallelism(tp=4, pp=1, dp=4))
    rows = p.rank_rows()
    assert [r["node"] for r in rows] == [0] * 8 + [1] * 8
    assert [r["tp"] for r in rows[:8]] == [0, 1, 2, 3, 0, 1, 2, 3]


@pytest.mark.parametrize(("par", "nodes"), [(Parallelism(tp=8, pp=2, dp=2), 2), (Parallelism(tp=0, pp=1, dp=8), 1)])
def test_degrees_must_multiply_to_the_gpus(h100: System, par: Parallelism, nodes: int) -> None:
    with pytest.raises(UserError):
        make_plan(PlanRequest(ResolvedSystem.plain(h100), nodes, par))


def test_orders_must_name_each_dimension_once() -> None:
    for bad in ("tp-dp-pp", "tp-tp-dp-pp", "tp-cp-dp-xx"):
        with pytest.raises(UserError, match="--order"):
            parse_order(bad)


def test_without_a_model_the_same_bytes_move_faster_in_the_placement(h100: System) -> None:
    result = make_plan(PlanRequest(ResolvedSystem.plain(h100), 4, Parallelism(tp=8, pp=2, dp=2)))
    assert result.basis == "reference" and result.step_time_s is None
    assert result.cost.groups["tp"].time_s < result.baseline_cost.groups["tp"].time_s
    assert result.cost.groups["tp"].tier.startswith("nvlink")
    assert result.baseline_cost.groups["tp"].tier.startswith("network")


def test_with_a_model_the_placement_predicts_a_faster_step_than_naive(h100: System) -> None:
    job = Job(load_model("llama2-7b"), global_batch=64, seq_len=4096)
    result = make_plan(PlanRequest(ResolvedSystem.plain(h100), 2, Parallelism(tp=4, pp=2, dp=2), job=job))
    assert result.basis == "step" and result.layout is not None
    assert result.placement.order[0] == "tp"
    assert result.step_time_s is not None and result.baseline_step_time_s is not None
    assert result.step_time_s < result.baseline_step_time_s


def test_megatron_order_is_the_step_models_own_answer(h100: System) -> None:
    from linkscope.model.step.layout import layouts_of
    from linkscope.model.step.step_collectives import exposed_per_group_s
    from linkscope.model.step.train import estimate_steps

    job = Job(load_model("llama2-7b"), global_batch=64, seq_len=4096)
    result = make_plan(PlanRequest(ResolvedSystem.plain(h100), 2, Parallelism(tp=8, pp=1, dp=2), job=job,
                                   order=parse_order("tp-cp-dp-pp")))
    lay = result.layout
    assert lay is not None
    est = estimate_steps(job, h100.with_nodes(2), layouts_of(lay))
    exposed = exposed_per_group_s(est, layouts_of(lay))
    assert result.cost.groups["tp"].time_s == pytest.approx(exposed["tp"], rel=1e-12)
    assert result.step_time_s == pytest.approx(float(est.step_time_s[0]), rel=1e-12)
    assert result.moves() == {}


def test_a_single_node_system_cannot_span_nodes() -> None:
    lonely = load_db([]).offerings["lambda/gpu_8x_h100_sxm5"].system
    with pytest.raises(UserError, match="cannot span"):
        make_plan(PlanRequest(ResolvedSystem.plain(lonely), 2, Parallelism(tp=8, pp=1, dp=2)))


def test_the_data_parallel_group_spans_the_context_parallel_ranks(h100: System) -> None:
    # Context-parallel ranks reduce the gradients of the same weights: the gradient group is dp x cp.
    p = place(h100.with_nodes(2), Parallelism(tp=4, pp=1, dp=2, cp=2))
    spans = group_spans(p)
    assert spans["dp"].ranks == 4 and spans["dp"].nodes == 2
    assert spans["cp"].ranks == 2 and spans["cp"].nodes == 1


def test_plan_prices_the_gradient_reduction_as_the_step_model_does_with_context_parallelism(h100: System) -> None:
    from linkscope.model.step.layout import layouts_of
    from linkscope.model.step.memory import weight_replicas
    from linkscope.model.step.search import LayoutRequest
    from linkscope.model.step.train import estimate_steps

    # No overlap: the step model's exposed data-parallel time is the whole reduce-scatter plus all-gather.
    job = Job(load_model("llama2-7b"), global_batch=64, seq_len=8192, dp_overlap=False)
    result = make_plan(PlanRequest(ResolvedSystem.plain(h100), 2, Parallelism(tp=4, pp=1, dp=2, cp=2), job=job,
                                   order=parse_order("tp-cp-dp-pp"), given=LayoutRequest(zero=1)))
    lay = result.layout
    assert lay is not None and lay.cp == 2
    est = estimate_steps(job, h100.with_nodes(2), layouts_of(lay))
    assert result.cost.groups["dp"].ranks == int(weight_replicas(layouts_of(lay))[0]) == 4
    assert result.cost.groups["dp"].time_s == pytest.approx(float(est.dp_comm_exposed_s[0]), rel=1e-12)
