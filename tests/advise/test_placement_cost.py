"""What a placement costs: each group's collectives priced on the ranks and nodes the placement gives it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from linkscope.advise.placement import Parallelism, place
from linkscope.advise.placement_cost import price_placement
from linkscope.hardware.loader import load_db
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.step.step_collectives import step_items
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import load_model
from tests.model.step.test_step_collectives import LAYOUT


@pytest.fixture
def job() -> Job:
    return Job(model=load_model("llama2-70b"), global_batch=64, seq_len=4096)


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
