"""`advise train`: ranking by cost or time, the reasons offerings drop out, deadlines and budgets, profiles."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from linkscope.advise.bookable import GpuRequest
from linkscope.advise.objective import Limits, Objective
from linkscope.advise.train import TrainAdvice, TrainOption, TrainRequest, _best, advise_train
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.hardware.offering import Offering
from linkscope.model.calibration.calibrate import OpFit, Segment
from linkscope.model.calibration.profiles import new_profile, save_profile
from linkscope.model.step.transformer import load_model

SMALL = ["aws/p5.48xlarge", "nebius/gpu-h100-sxm_8gpu-128vcpu-1600gb", "azure/Standard_ND96amsr_A100_v4",
         "gcp/a2-highgpu-8g", "coreweave/hgx-b200", "lambda/gpu_8x_h100_sxm5", "aws/g6e.48xlarge"]


@pytest.fixture
def db() -> HardwareDB:
    return load_db([])


UNPRICED = "coreweave/hgx-b200"
"""Taken without its price, so that the tests do not depend on which providers publish one."""


def _offerings(db: HardwareDB, ids: list[str] = SMALL) -> list[Offering]:
    return [replace(db.offerings[i], price_per_hour=None) if i == UNPRICED else db.offerings[i] for i in ids]


def _request(gpus: GpuRequest, objective: Objective = Objective.COST, limits: Limits = Limits(),
             model: str = "llama2-7b", tokens: float = 2e10, **kw: object) -> TrainRequest:
    return TrainRequest(model=load_model(model), tokens=tokens, global_batch=256, seq_len=4096, gpus=gpus,
                        objective=objective, limits=limits, **kw)  # type: ignore[arg-type]


def _row(advice: TrainAdvice, offering: str) -> TrainOption:
    return next(r for r in advice.rows if r.offering == offering)


def test_cost_objective_ranks_by_total_cost_with_unknown_prices_last(db: HardwareDB) -> None:
    advice = advise_train(_request(GpuRequest(gpus=16)), _offerings(db))
    priced = [r for r in advice.feasible if r.cost_usd is not None]
    unpriced = [r for r in advice.feasible if r.cost_usd is None]
    assert [r.cost_usd for r in priced] == sorted(r.cost_usd for r in priced)  # type: ignore[misc]
    assert advice.feasible == priced + unpriced
    assert _row(advice, "coreweave/hgx-b200").feasible and "price unknown" in _row(advice, "coreweave/hgx-b200").notes


def test_time_objective_ranks_by_time_and_includes_unpriced_offerings(db: HardwareDB) -> None:
    advice = advise_train(_request(GpuRequest(gpus=16), Objective.TIME), _offerings(db))
    times = [r.time_to_train_s for r in advice.feasible]
    assert times == sorted(times)  # type: ignore[type-var]
    # B200 nodes are the fastest of the set even though their price is unknown.
    assert advice.feasible[0].offering == "coreweave/hgx-b200"


def test_time_and_cost_follow_from_throughput_and_price(db: HardwareDB) -> None:
    advice = advise_train(_request(GpuRequest(gpus=16)), _offerings(db, ["aws/p5.48xlarge"]))
    row = advice.rows[0]
    assert row.nodes == 2 and row.gpus == 16
    assert row.time_to_train_s == pytest.approx(2e10 / row.tokens_per_s)  # type: ignore[operator]
    assert row.cost_usd == pytest.approx(55.04 * 2 * row.time_to_train_s / 3600)  # type: ignore[operator]
    assert row.parallelism is not None
    assert row.parallelism is not None and row.parallelism.world == 16
    assert row.bottleneck and row.bottleneck.split()[0].endswith("-bound")


def test_reasons_for_offerings_that_cannot_run_the_job(db: HardwareDB) -> None:
    nebius = db.offerings["nebius/gpu-h100-sxm_8gpu-128vcpu-1600gb"]
    closed = replace(nebius, id="test/closed", multi_node=False)
    small = replace(nebius, id="test/small", system=replace(nebius.system, max_nodes=2))
    offerings = _offerings(db, ["lambda/gpu_8x_h100_sxm5", "aws/g6e.48xlarge"]) + [closed, small]
    advice = advise_train(_request(GpuRequest(gpus=32)), offerings)
    reasons = {r.offering: r.reason or "" for r in advice.infeasible}
    assert "no network between nodes" in reasons["lambda/gpu_8x_h100_sxm5"]
    assert "NIC rate unknown" in reasons["aws/g6e.48xlarge"]
    assert "not bookable" in reasons["test/closed"]
    assert "at most 2 nodes" in reasons["test/small"]
    assert advice.feasible == []


def test_gpu_counts_that_do_not_fill_nodes_and_models_that_fit_nowhere(db: HardwareDB) -> None:
    advice = advise_train(_request(GpuRequest(gpus=12)), _offerings(db, ["aws/p5.48xlarge"]))
    assert "do not fill whole nodes of 8" in (advice.rows[0].reason or "")
    big = advise_train(_request(GpuRequest(gpus=8), model="megatron-1t"), _offerings(db, ["aws/p5.48xlarge"]))
    assert big.feasible == [] and "does not fit in memory" in (big.rows[0].reason or "")


def test_fp8_needs_fp8_tensor_cores(db: HardwareDB) -> None:
    advice = advise_train(_request(GpuRequest(gpus=8), precision="fp8"),
                          _offerings(db, ["azure/Standard_ND96amsr_A100_v4", "aws/p5.48xlarge"]))
    assert "no FP8" in (_row(advice, "azure/Standard_ND96amsr_A100_v4").reason or "")
    assert _row(advice, "aws/p5.48xlarge").feasible


def test_a_deadline_moves_the_choice_to_more_gpus(db: HardwareDB) -> None:
    # On a 100 Gbit/s TCP network scaling out costs money, so the cheapest count is a small one.
    offerings = _offerings(db, ["gcp/a2-highgpu-8g"])
    gpus = GpuRequest(None, 8, 128)
    free = advise_train(_request(gpus, model="llama2-13b"), offerings).rows[0]
    deadline_s = free.p90_time_s / 2.5
    rushed = advise_train(_request(gpus, limits=Limits(deadline_s=deadline_s), model="llama2-13b"), offerings).rows[0]
    assert rushed.feasible and (rushed.gpus or 0) > (free.gpus or 0)
    # Held to the deadline on its p90, not its central value.
    assert (rushed.time_to_train_s or 0.0) < rushed.p90_time_s <= deadline_s
    assert (rushed.cost_usd or 0.0) > (free.cost_usd or 0.0)


def test_missed_deadlines_and_budgets_are_reasons_and_closest_come_first(db: HardwareDB) -> None:
    advice = advise_train(_request(GpuRequest(gpus=16), limits=Limits(deadline_s=60.0)), _offerings(db))
    assert advice.feasible == []
    missed = [r for r in advice.rows if r.time_to_train_s is not None]
    assert all("misses the deadline" in (r.reason or "") for r in missed)
    # Closest first on what the deadline is judged by: the p90 time (ranges differ in width between offerings).
    assert [r.p90_time_s for r in missed] == sorted(r.p90_time_s for r in missed)  # type: ignore[misc]
    assert advice.rows[:len(missed)] == missed
    broke = advise_train(_request(GpuRequest(gpus=16), limits=Limits(budget_usd=1.0)), _offerings(db))
    assert broke.feasible == []
    assert "over budget" in (_row(broke, "aws/p5.48xlarge").reason or "")
    assert "price unknown" in (_row(broke, "coreweave/hgx-b200").reason or "")


def test_budget_keeps_only_offerings_within_it(db: HardwareDB) -> None:
    everything = advise_train(_request(GpuRequest(gpus=16)), _offerings(db))
    costs = sorted(r.cost_usd for r in everything.feasible if r.cost_usd is not None)
    budget = (costs[0] + costs[1]) / 2
    advice = advise_train(_request(GpuRequest(gpus=16), limits=Limits(budget_usd=budget)), _offerings(db))
    assert [r.cost_usd for r in advice.feasible] == [costs[0]]


def test_near_ties_in_cost_go_to_the_faster_option() -> None:
    def option(cost: float, time_s: float) -> TrainOption:
        return TrainOption("x", "p", "g", 8, 1.0, feasible=True, cost_usd=cost, time_to_train_s=time_s)

    slow_cheap, fast_close, fast_dear = option(100.0, 1000.0), option(103.0, 200.0), option(150.0, 100.0)
    assert _best([slow_cheap, fast_close, fast_dear], Objective.COST) is fast_close
    assert _best([slow_cheap, fast_close, fast_dear], Objective.TIME) is fast_dear


def test_invalid_requests_are_user_errors(db: HardwareDB) -> None:
    with pytest.raises(UserError, match="^precision: "):
        advise_train(_request(GpuRequest(gpus=8), precision="int3"), _offerings(db))
    with pytest.raises(UserError, match="^gpus: "):
        advise_train(_request(GpuRequest(gpus=0)), _offerings(db))


def test_a_saved_profile_replaces_the_catalog_figures(db: HardwareDB, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path))
    offering = db.offerings["aws/p5.48xlarge"]
    before = advise_train(_request(GpuRequest(gpus=8)), [offering]).rows[0]
    slow = OpFit("all_reduce", 8, 1, (Segment(20.0, 5.0, float("inf")),), 0.01, 0.02, 12)
    save_profile(new_profile("p5-measured", "run1", 8, 1, "nccl", {"all_reduce": slow}, offering.system,
                             offering.id, ""))
    after = advise_train(_request(GpuRequest(gpus=8)), [offering]).rows[0]
    assert after.measured_profile == "p5-measured"
    assert "uses measured figures from profile p5-measured" in after.notes
    assert (after.step_time_s or 0.0) > (before.step_time_s or 0.0)


def test_options_carry_time_and_cost_ranges_and_rank_by_the_central_value(db: HardwareDB) -> None:
    advice = advise_train(_request(GpuRequest(gpus=8)), _offerings(db, ["aws/p5.48xlarge"]))
    option = advice.rows[0]
    assert option.feasible and option.time_to_train_s_range and option.cost_usd_range
    lo, hi = option.time_to_train_s_range
    assert lo < (option.time_to_train_s or 0.0) < hi
    assert option.cost_usd_range[0] < (option.cost_usd or 0.0) < option.cost_usd_range[1]


def test_nvl72_racks_run_on_64_gpus_when_no_layout_divides_72(db: HardwareDB) -> None:
    # 72 = 8 x 9: no power-of-two batch, head or layer count divides it, so a rack runs 16 of its 18 trays (64 GPUs)
    # and pays for all 18.
    request = TrainRequest(model=load_model("llama2-70b"), tokens=1e9, global_batch=1024, seq_len=4096,
                           gpus=GpuRequest(low=72, high=72))
    # A priced GB200 tray of a rack whose booking is unknown: nodes alone, or the whole rack.
    tray = replace(db.offerings["gcp/a4x-highgpu-4g"], price_per_hour=42.0, price_as_of=date(2026, 9, 20))
    advice = advise_train(request, [tray])
    row = _row(advice, "gcp/a4x-highgpu-4g")
    assert row.feasible and row.nodes == 18 and row.gpus == 64 and row.booked_nodes == 18
    assert row.parallelism is not None
    p = row.parallelism
    assert p.tp * p.pp * p.dp * p.cp == 64
    assert row.cost_usd == pytest.approx(18 * 42.0 * (row.time_to_train_s or 0.0) / 3600.0)
    assert any("64 of the 72 GPUs per NVLink domain (16 of its 18 nodes)" in note for note in row.notes)


def test_whole_domains_are_booked_and_paid_where_a_provider_sells_them_so(db: HardwareDB) -> None:
    # CoreWeave sells GB200 NVL72 racks whole: 8 GPUs run on 2 trays but pay for the rack's 18.
    request = TrainRequest(model=load_model("llama3-8b"), tokens=1e9, global_batch=256, seq_len=4096,
                           gpus=GpuRequest(gpus=8))
    row = _row(advise_train(request, _offerings(db, ["coreweave/gb200-4x"])), "coreweave/gb200-4x")
    assert row.feasible and (row.nodes, row.booked_nodes) == (2, 18)
    assert row.cost_usd == pytest.approx(18 * 42.0 * (row.time_to_train_s or 0.0) / 3600.0)
    assert any(n.startswith("books 1 whole 72-GPU NVLink domain (18 nodes)") for n in row.notes)


def test_nodes_booked_one_by_one_get_nvlink_inside_each_node_only(db: HardwareDB) -> None:
    # A tray offering whose bookings may not share a domain: 8 GPUs are 2 trays joined by their NICs.
    request = TrainRequest(model=load_model("llama3-8b"), tokens=1e9, global_batch=256, seq_len=4096,
                           gpus=GpuRequest(gpus=8))
    base = replace(db.offerings["gcp/a4x-highgpu-4g"], price_per_hour=42.0, price_as_of=date(2026, 9, 20))
    apart = _row(advise_train(request, [replace(base, books_whole_domain=False)]), base.id)
    whole = _row(advise_train(request, [replace(base, books_whole_domain=True)]), base.id)
    assert apart.feasible and (apart.nodes, apart.booked_nodes) == (2, 2)
    assert any("NVLink inside each 4-GPU node only" in n for n in apart.notes)
    assert (whole.nodes, whole.booked_nodes) == (2, 18)
    assert (whole.step_time_s or 0.0) < (apart.step_time_s or 0.0)
    assert (apart.cost_usd or 0.0) < (whole.cost_usd or 0.0)


def test_gb200_trays_and_hgx_b200_nodes_are_ranked_side_by_side_with_their_cost(db: HardwareDB) -> None:
    request = TrainRequest(model=load_model("llama3-70b"), tokens=1e10, global_batch=512, seq_len=8192,
                           gpus=GpuRequest(gpus=64))
    # Prices set here, so that the test does not depend on the catalog's.
    offerings = [replace(db.offerings["coreweave/gb200-4x"], price_per_hour=42.0),
                 replace(db.offerings["coreweave/hgx-b200"], price_per_hour=68.8)]
    advice = advise_train(request, offerings)
    trays, hgx = _row(advice, "coreweave/gb200-4x"), _row(advice, "coreweave/hgx-b200")
    assert trays.feasible and hgx.feasible and trays.cost_usd and hgx.cost_usd
    assert (trays.nodes, trays.gpus_per_node, hgx.nodes, hgx.gpus_per_node) == (16, 4, 8, 8)
    assert trays.cost_usd == pytest.approx(18 * 42.0 * (trays.time_to_train_s or 0.0) / 3600.0)
    assert hgx.cost_usd == pytest.approx(8 * 68.8 * (hgx.time_to_train_s or 0.0) / 3600.0)
    assert [r.offering for r in advice.feasible][:2] == sorted(
        [trays.offering, hgx.offering], key=lambda o: _row(advice, o).cost_usd or 0.0)


def test_the_frontier_holds_every_plan_that_nothing_beats_on_both_time_and_cost(db: HardwareDB) -> None:
    # Up to 128 GPUs: at 8..64 one plan (8 nodes) is both the cheapest and the fastest once ZeRO-2 pays its
    # per-micro-batch reduce-scatters, which leaves no frontier to check.
    advice = advise_train(_request(GpuRequest(None, 8, 128)), _offerings(db))
    front = advice.frontier
    assert len(front) >= 2 and all(p.frontier and p.feasible for p in front)
    assert [p.cost_usd for p in front] == sorted(p.cost_usd for p in front)  # type: ignore[misc]
    key = {(p.offering, p.nodes) for p in front}
    for plan in advice.plans:
        if plan.cost_usd is None or not plan.feasible:
            continue
        beaten = [p for p in front if p.time_to_train_s <= plan.time_to_train_s  # type: ignore[operator]
                  and p.cost_usd <= plan.cost_usd and (p.offering, p.nodes) != (plan.offering, plan.nodes)]  # type: ignore[operator]
        assert ((plan.offering, plan.nodes) in key) != bool(beaten)
    # The per-offering rows carry the mark of their plan.
    for row in advice.feasible:
        assert row.frontier == ((row.offering, row.nodes) in key)


def test_plans_past_the_deadline_are_kept_but_not_on_the_frontier(db: HardwareDB) -> None:
    free = advise_train(_request(GpuRequest(None, 8, 64)), _offerings(db))
    slowest = max(p.time_to_train_s or 0.0 for p in free.plans)
    deadline_s = slowest * 0.6
    held = advise_train(_request(GpuRequest(None, 8, 64), limits=Limits(deadline_s=deadline_s)), _offerings(db))
    assert len(held.plans) == len(free.plans)
    late = [p for p in held.plans if (p.time_to_train_s or 0.0) > deadline_s]
    assert late and all(not p.feasible and "misses the deadline" in (p.reason or "") for p in late)
    assert all((p.time_to_train_s or 0.0) <= deadline_s for p in held.frontier)


def test_a_plan_meets_the_deadline_on_its_p90_not_its_central_value(db: HardwareDB) -> None:
    # A deadline between the central time and the p90 of the only plan: the plan misses it, and says both.
    offerings = _offerings(db, ["aws/p5.48xlarge"])
    free = advise_train(_request(GpuRequest(gpus=16), model="llama2-13b"), offerings).rows[0]
    central, p90 = free.time_to_train_s or 0.0, free.p90_time_s
    assert central < p90
    between = Limits(deadline_s=(central + p90) / 2, deadline_given="between")
    held = advise_train(_request(GpuRequest(gpus=16), limits=between, model="llama2-13b"), offerings).rows[0]
    assert not held.feasible and held.time_to_train_s == central
    assert held.reason is not None and "misses the deadline (p90 " in held.reason and "central" in held.reason
    assert held.reason.endswith("> between)")


def test_a_deadline_prints_in_the_unit_it_was_given() -> None:
    from linkscope.advise.inputs import parse_deadline

    assert parse_deadline("0.0001s").deadline_text() == "0.0001 s"
    assert parse_deadline("36h").deadline_text() == "36 h" and parse_deadline("90min").deadline_text() == "90 min"
    assert parse_deadline(None).deadline_text() == "90 d" and parse_deadline("none").deadline_s is None
