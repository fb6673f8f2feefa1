"""`advise infer`: the best layout per offering at a per-user speed, ranked by dollars per million tokens."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from linkscope.advise.infer import InferOption, InferRequest, advise_infer, plan_infer
from linkscope.advise.objective import Objective
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.step.transformer import load_model

IDS = ["aws/p5.48xlarge", "nebius/gpu-h100-sxm_8gpu-128vcpu-1600gb", "lambda/gpu_8x_a100",
       "coreweave/hgx-h100", "hyperstack/8x-h100-sxm"]


@pytest.fixture
def db() -> HardwareDB:
    return load_db([])


def _request(model: str = "llama2-13b", budget: float = 30.0, **kw: object) -> InferRequest:
    return InferRequest(load_model(model), budget, input_tokens=1024, output_tokens=256, **kw)  # type: ignore[arg-type]


def _offerings(db: HardwareDB) -> list:  # type: ignore[type-arg]
    # One offering without its price, so that the tests do not depend on which providers publish one.
    return [replace(db.offerings[i], price_per_hour=None) if i == "coreweave/hgx-h100" else db.offerings[i]
            for i in IDS]


def _advise(db: HardwareDB, model: str = "llama2-13b", budget: float = 30.0, **kw: object) -> list[InferOption]:
    return advise_infer(_request(model, budget, **kw), _offerings(db))


def test_ranked_by_dollars_per_million_tokens_with_unknown_prices_after(db: HardwareDB) -> None:
    rows = _advise(db)
    feasible = [r for r in rows if r.feasible]
    priced = [r.usd_per_million_tokens for r in feasible if r.usd_per_million_tokens is not None]
    assert priced == sorted(priced)
    assert feasible[-1].offering == "coreweave/hgx-h100" and feasible[-1].usd_per_million_tokens is None


def test_each_option_meets_the_budget_inside_one_node_and_prices_follow(db: HardwareDB) -> None:
    for r in _advise(db):
        assert r.feasible
        assert r.tokens_per_s_per_user >= 30.0
        assert r.pp == 1 and r.gpus_per_node % r.tp == 0
        if r.price_per_gpu_hour is not None:
            expected = r.price_per_gpu_hour / (r.tokens_per_s_per_gpu * 3600) * 1e6
            assert r.usd_per_million_tokens == pytest.approx(expected)


def test_a_request_rate_sizes_the_fleet(db: HardwareDB) -> None:
    for r in _advise(db, qps=20.0):
        replica = r.tokens_per_s_per_gpu * r.gpus_per_replica
        assert r.replicas == math.ceil(20.0 * 256 / replica)
        assert r.nodes_needed == math.ceil(r.replicas * r.gpus_per_replica / r.gpus_per_node)


def test_too_fast_a_budget_and_too_big_a_model_give_reasons(db: HardwareDB) -> None:
    rows = _advise(db, budget=5000.0)
    assert not any(r.feasible for r in rows)
    assert all("too slow for 5000 tokens/s per user" in (r.reason or "") for r in rows)
    big = _advise(db, model="llama3.1-405b")
    reasons = {r.offering: r.reason or "" for r in big if not r.feasible}
    assert "more than one node" in reasons["hyperstack/8x-h100-sxm"]
    across = next(r for r in big if r.offering == "aws/p5.48xlarge")
    assert across.pp is not None and across.pp > 1


def test_bad_values_are_user_errors(db: HardwareDB) -> None:
    with pytest.raises(UserError, match="^latency_budget: "):
        _advise(db, budget=-1.0)
    with pytest.raises(UserError, match="^qps: "):
        _advise(db, qps=0.0)
    with pytest.raises(UserError, match="^precision: "):
        _advise(db, precision="int4")


def test_the_serving_frontier_trades_speed_per_user_against_price_per_token(db: HardwareDB) -> None:
    advice = plan_infer(_request(), _offerings(db))
    front = advice.frontier
    assert len(front) >= 2 and front[0].frontier_role == "cheapest" and front[-1].frontier_role == "fastest"
    costs = [p.usd_per_million_tokens for p in front]
    speeds = [p.tokens_per_s_per_user for p in front]
    assert costs == sorted(costs) and speeds == sorted(speeds)  # type: ignore[type-var]
    assert all(p.feasible and (p.tokens_per_s_per_user or 0.0) >= 30.0 for p in front)
    # The cheapest plan anywhere is the cheapest offering's row at the budget; no row beats a frontier plan.
    priced = [r for r in advice.rows if r.feasible and r.usd_per_million_tokens is not None]
    assert front[0].usd_per_million_tokens == pytest.approx(min(r.usd_per_million_tokens for r in priced))
    for r in priced:
        assert any(p.usd_per_million_tokens <= r.usd_per_million_tokens  # type: ignore[operator]
                   and p.tokens_per_s_per_user >= r.tokens_per_s_per_user for p in front)  # type: ignore[operator]
        assert r.frontier == any((p.offering, p.tp, p.batch) == (r.offering, r.tp, r.batch) for p in front)


def test_the_time_objective_ranks_each_offerings_fastest_plan(db: HardwareDB) -> None:
    by_cost = {r.offering: r for r in _advise(db) if r.feasible}
    by_time = [r for r in advise_infer(_request(objective=Objective.TIME), _offerings(db)) if r.feasible]
    speeds = [r.tokens_per_s_per_user for r in by_time]
    assert speeds == sorted(speeds, reverse=True)  # type: ignore[type-var]
    assert all((r.tokens_per_s_per_user or 0.0) >= (by_cost[r.offering].tokens_per_s_per_user or 0.0)
               for r in by_time)


def test_advise_infer_gives_predict_infers_batch_and_speeds_on_the_same_offering() -> None:
    import json

    from tests.cli.helpers import run_cli

    job = ("-m", "llama3.1-70b", "--tp", "2", "--input-tokens", "8192", "--output-tokens", "256",
           "--latency-budget", "30", "--precision", "fp8", "--json")
    advice = run_cli("advise", "infer", "--gpu", "H200", "--objective", "cost", *job)
    assert advice.exit_code == 0, advice.stderr
    row = next(r for r in json.loads(advice.stdout)["rows"] if r["offering"] == "amaya/H200-sxm5x8-NVLINK")
    predicted = json.loads(run_cli("predict", "infer", "-s", "amaya/H200-sxm5x8-NVLINK", *job).stdout)
    assert row["batch"] == predicted["batch"]
    for key in ("tokens_per_s_per_gpu", "tokens_per_s_per_user", "tpot_s"):
        assert row[key] == pytest.approx(predicted[key], rel=1e-9), key
    assert row["tokens_per_s_per_user"] * row["tpot_s"] == pytest.approx(1.0)
