"""`advise infer --disaggregated`: pools searched by rate matching, the TTFT budget, colocated beside, KV links."""

from __future__ import annotations

import math

import pytest

from linkscope.advise.disagg import DisaggRequest, advise_disagg
from linkscope.advise.disagg_links import compare_kv_links
from linkscope.advise.infer import InferRequest, serve
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.step.kv_transfer import KvOptions
from linkscope.model.step.transformer import load_model

IDS = ["aws/p5.48xlarge", "nebius/gpu-h100-sxm_8gpu-128vcpu-1600gb", "lambda/gpu_8x_a100"]


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db([])


def _request(ttft: float | None = None, **kw: object) -> DisaggRequest:
    base = InferRequest(load_model("llama3-70b"), 30.0, input_tokens=8192, output_tokens=512)
    return DisaggRequest(base, ttft, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def advice(db: HardwareDB):
    return advise_disagg(_request(), [db.offerings[i] for i in IDS])


def test_every_plan_meets_the_per_user_budget_and_costs_by_its_gpus(advice) -> None:
    assert advice.frontier
    for plan in advice.frontier:
        assert 1.0 / plan.tpot_s >= 30.0 - 1e-9
        if plan.kind == "disaggregated":  # every GPU of the nodes rented counts
            assert plan.gpus % 8 == 0 and plan.nodes == plan.gpus // 8
        if plan.usd_per_million_tokens is not None:
            assert plan.usd_per_million_tokens == pytest.approx(
                plan.price_per_gpu_hour / (plan.tokens_per_s_per_gpu * 3600) * 1e6)
    costs = [p.usd_per_million_tokens for p in advice.frontier]
    times = [p.tpot_s for p in advice.frontier]
    assert costs == sorted(costs) and times == sorted(times, reverse=True)


def test_the_colocated_answer_is_advise_infers_own(db: HardwareDB, advice) -> None:
    answer = next(a for a in advice.answers if a.offering == "aws/p5.48xlarge")
    assert answer.colocated is not None
    own = serve(db.offerings["aws/p5.48xlarge"], _request().base)
    assert answer.colocated.tokens_per_s_per_gpu == pytest.approx(own.tokens_per_s_per_gpu)
    assert answer.winner in ("colocated", "disaggregated")


def test_disaggregated_plans_name_their_path_and_bottleneck(advice) -> None:
    plans = [a.disaggregated for a in advice.answers if a.disaggregated]
    assert plans
    for p in plans:
        assert p.kv_path in ("nvlink", "rdma", "tcp") and p.bottleneck in ("prefill", "kv", "decode")
        assert p.ttft_s > p.details["kv_transfer_s"] >= 0


def test_a_ttft_budget_no_plan_meets_says_what_the_fastest_gives(db: HardwareDB) -> None:
    advice = advise_disagg(_request(0.01), [db.offerings[i] for i in IDS])
    assert advice.frontier == []
    assert advice.no_plan is not None and advice.no_plan.startswith("no plan meets TTFT 0.01 s: the fastest gives ")


def test_a_ttft_budget_keeps_only_plans_within_it(db: HardwareDB) -> None:
    advice = advise_disagg(_request(1.5), [db.offerings[i] for i in IDS])
    assert advice.frontier and all(p.ttft_s <= 1.5 for p in advice.frontier)


@pytest.mark.parametrize(("request_", "field"), [
    (_request(-1.0), "ttft_budget"),
    (_request(math.nan), "ttft_budget"),
    (_request(kv=KvOptions(block_tokens=0)), "block_tokens"),
    (_request(kv_precision="int3"), "kv_precision"),
])
def test_bad_requests_name_their_field(db: HardwareDB, request_: DisaggRequest, field: str) -> None:
    with pytest.raises(UserError) as err:
        advise_disagg(request_, [db.offerings[IDS[0]]])
    assert err.value.field == field


def test_the_kv_link_comparison_has_colocated_and_three_links(db: HardwareDB) -> None:
    c = compare_kv_links(_request(), db.offerings["aws/p5.48xlarge"], db, price_per_gpu_hour=4.0)
    assert [r.serving for r in c.rows] == ["colocated", "disaggregated", "disaggregated", "disaggregated"]
    links = [r.kv_link.split()[0] for r in c.rows[1:]]
    assert links == ["nvlink", "rdma", "tcp"]
    rdma, tcp = c.rows[2].plan, c.rows[3].plan
    assert rdma is not None and tcp is not None and rdma.kv_path == "rdma" and tcp.kv_path == "tcp"
    assert all(r.price.usd_per_gpu_hour == 4.0 for r in c.rows)
