"""The `advise` and `plan` commands: JSON keys, readable tables, one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner, Result

from linkscope.cli import advise_cmd, plan_cmd

TRAIN = ["advise", "train", "--model", "llama2-7b", "--tokens", "2B", "--gpus", "16", "--provider", "aws,nebius"]


def _app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """linkscope."""

    advise_cmd.register(app)
    plan_cmd.register(app)
    return app


def run(*args: str) -> Result:
    return CliRunner().invoke(_app(), list(args), catch_exceptions=False, env={"COLUMNS": "100"})


def test_train_json_rows_carry_the_documented_keys() -> None:
    result = run(*TRAIN, "--objective", "cost", "--json", "--all")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["request"]["global_batch"] == 1024 and doc["request"]["global_batch_is_default"]
    assert doc["request"]["tokens"] == 2e9
    keys = {"offering", "nodes", "gpus", "parallelism", "step_time_s", "time_to_train_s", "cost_usd", "mfu",
            "bottleneck", "feasible", "reason"}
    assert doc["rows"] and all(keys | {"frontier", "frontier_role"} <= set(row) for row in doc["rows"])
    feasible = [r for r in doc["rows"] if r["feasible"]]
    assert [r["cost_usd"] for r in feasible if r["cost_usd"] is not None] == sorted(
        r["cost_usd"] for r in feasible if r["cost_usd"] is not None)
    assert all(r["gpus"] == 16 and r["nodes"] * r["gpus_per_node"] == 16 for r in feasible)


def test_train_table_fits_a_100_column_terminal_and_names_the_winner() -> None:
    result = run(*TRAIN, "--top", "3", "--objective", "cost")
    assert result.exit_code == 0, result.stderr
    assert "Best: " in result.stdout and "ranked by total cost" in result.stdout
    assert "default ~4M tokens" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 100


def test_compare_interconnect_adds_the_what_if_table() -> None:
    # Ranked by time: by cost the cheapest H100 and B200 plans are within 1% of each other, so which comes
    # first would hang on the fitted GEMM shares.
    result = run(*TRAIN, "--objective", "time", "--compare-interconnect", "--json")
    doc = json.loads(result.stdout)
    variants = doc["interconnect"]["variants"]
    assert variants[0]["as_offered"] and doc["interconnect"]["offering"] == doc["rows"][0]["offering"]
    classes = {v["scale_up_class"] for v in variants}
    # The fastest plan is a Blackwell one, and Blackwell is sold in NVL72 racks too: four kinds inside the node.
    assert classes == {"pcie", "nvlink-mesh", "nvswitch", "rack"} and len(variants) == 16
    assert all({"usd_per_gpu_hour", "source", "match"} <= set(v["price"]) for v in variants)
    text = run(*TRAIN, "--compare-interconnect", "--top", "1", "--price-per-gpu-hour", "3").stdout
    assert "on every interconnect" in text and "3 USD per GPU-hour" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_advise_infer_compares_interconnects_in_one_table() -> None:
    args = ["advise", "infer", "--model", "llama3.1-70b", "--latency-budget", "30", "--input-tokens", "8192",
            "--output-tokens", "256", "--gpu", "H200", "--tp", "2", "--top", "2", "--compare-interconnect"]
    doc = json.loads(run(*args, "--json").stdout)
    variants = doc["interconnect"]["variants"]
    assert doc["interconnect"]["kind"] == "infer" and all(v["tp"] == 2 for v in variants if v["tp"])
    assert {"nvswitch", "nvlink-mesh", "pcie"} <= {v["scale_up_class"] for v in variants}
    text = run(*args).stdout
    assert "NVLink mesh" in text and "$/Mtok" in text and "price per GPU-hour from" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_nothing_within_the_budget_says_so_with_the_closest_options() -> None:
    result = run(*TRAIN, "--budget", "1")
    assert result.exit_code == 0
    assert "No plan fits the budget ($1.00): the cheapest costs" in " ".join(result.stdout.split())
    assert "over budget" in result.stdout
    doc = json.loads(run(*TRAIN, "--budget", "1", "--json").stdout)
    assert doc["rows"] == [] and doc["closest"] and doc["feasible"] == 0


def test_an_empty_filter_says_so() -> None:
    result = run("advise", "train", "--model", "llama2-7b", "--tokens", "1B", "--gpu", "L40S", "--nvswitch")
    assert result.exit_code == 0
    assert "No offering matches these filters" in result.stdout


def test_the_default_answer_is_the_frontier_within_the_default_deadline() -> None:
    from linkscope.advise.objective import DEFAULT_DEADLINE_S

    # The done-when case of the frontier: whole catalog, free node count, 2T tokens.
    args = ["advise", "train", "--model", "llama2-70b", "--tokens", "2T"]
    doc = json.loads(run(*args, "--json").stdout)
    assert doc["request"]["view"] == "frontier" and doc["request"]["deadline_is_default"]
    assert doc["request"]["deadline_s"] == DEFAULT_DEADLINE_S
    rows = doc["rows"]
    front = [r for r in rows if r["frontier"]]
    assert rows[: len(front)] == front and len(front) == doc["frontier_plans"] >= 2
    assert all(r["time_to_train_s"] <= DEFAULT_DEADLINE_S for r in rows)
    # Cheapest first, fastest last, each faster than the one before and dearer.
    assert [r["cost_usd"] for r in front] == sorted(r["cost_usd"] for r in front)
    assert [r["time_to_train_s"] for r in front] == sorted((r["time_to_train_s"] for r in front), reverse=True)
    assert front[0]["frontier_role"] == "cheapest" and front[-1]["frontier_role"] == "fastest"
    assert all(r["frontier_role"] == "between" for r in front[1:-1])
    others = rows[len(front):]
    assert all(r["frontier_role"] is None for r in others)
    assert others and not any(r["frontier"] for r in others)
    # Every other offering is beaten on both time and cost by some plan of the frontier.
    for r in others:
        if r["cost_usd"] is not None:
            assert any(f["time_to_train_s"] <= r["time_to_train_s"] and f["cost_usd"] <= r["cost_usd"] for f in front)
    text = run(*TRAIN).stdout
    assert "deadline 90 d (the default" in text and "plans on the frontier" in text and "Cheapest: " in text
    # The other offerings' rows are each offering's cheapest plan, or a faster one within COST_TIE of its cost.
    assert "each at its cheapest plan within the limits, or a faster one costing at most 5% more" in \
        " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 100


def test_no_deadline_and_a_flat_list_on_request() -> None:
    doc = json.loads(run(*TRAIN, "--deadline", "none", "--json").stdout)
    assert doc["request"]["deadline_s"] is None and doc["request"]["view"] == "frontier"
    flat = json.loads(run(*TRAIN, "--objective", "time", "--json").stdout)
    assert flat["request"]["view"] == "list" and flat["request"]["objective"] == "time"
    times = [r["time_to_train_s"] for r in flat["rows"]]
    assert times == sorted(times) and any(r["frontier"] for r in flat["rows"])


def test_nothing_meets_the_deadline_names_the_fastest_plan_and_exits_0() -> None:
    result = run(*TRAIN, "--deadline", "1h")
    assert result.exit_code == 0
    assert "No plan meets the deadline (1 h) at its p90: the fastest takes" in " ".join(result.stdout.split())
    assert "[dim]" not in result.stdout  # an unpriced fastest plan says so in words, not in leaked markup
    doc = json.loads(run(*TRAIN, "--deadline", "1h", "--json").stdout)
    assert doc["rows"] == [] and doc["closest"] and doc["frontier_plans"] == 0


@pytest.mark.parametrize(("deadline", "message"), [
    ("0", "must be longer than zero"), ("0d", "must be longer than zero"), ("-3d", "must be longer than zero"),
    ("soon", "cannot read 'soon'"), ("30", "cannot read '30'"), ("1000y", "longer than 10 years"),
    ("nan", "cannot read"), ("1e400d", "cannot read"),
])
def test_bad_deadlines_are_one_line_and_exit_2(deadline: str, message: str) -> None:
    result = run("advise", "train", "--model", "llama2-7b", "--tokens", "1B", f"--deadline={deadline}")
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--tokens", "lots"], "--tokens"),
    (["--tokens", "1B", "--gpus-range", "64..8"], "--gpus-range"),
    (["--tokens", "1B", "--budget", "-5"], "negative"),
    (["--tokens", "1B", "--deadline", "30"], "--deadline"),
    (["--tokens", "1B", "--objective", "speed"], "--objective"),
    (["--tokens", "1B", "--gpus", "8", "--gpus-range", "8..16"], "one or the other"),
    (["--tokens", "1B", "--fabric", "smoke-signals"], "--fabric"),
])
def test_bad_train_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = run("advise", "train", "--model", "llama2-7b", *args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_model_is_exit_2() -> None:
    result = run("advise", "train", "--model", "llama9-900b", "--tokens", "1B")
    assert result.exit_code == 2 and "unknown model" in result.stderr


def test_infer_json_and_table() -> None:
    args = ["advise", "infer", "--model", "llama2-13b", "--latency-budget", "30", "--provider", "nebius,lambda"]
    doc = json.loads(run(*args, "--qps", "5", "--json").stdout)
    assert {"offering", "tp", "pp", "batch", "tokens_per_s_per_gpu", "usd_per_million_tokens", "replicas",
            "frontier", "frontier_role"} <= set(doc["rows"][0])
    assert doc["request"]["view"] == "frontier" and doc["rows"][0]["frontier_role"] == "cheapest"
    front = [r for r in doc["rows"] if r["frontier"]]
    assert doc["rows"][: len(front)] == front and not any(r["frontier"] for r in doc["rows"][len(front):])
    flat = json.loads(run(*args, "--objective", "cost", "--json").stdout)
    assert flat["request"]["view"] == "list" and flat["rows"][0]["offering"] == front[0]["offering"]
    text = run(*args, "--qps", "5").stdout
    assert "$/Mtok" in text and max(len(line) for line in text.splitlines()) <= 100
    bad = run("advise", "infer", "--model", "llama2-13b", "--latency-budget", "-3")
    assert bad.exit_code == 2 and "--latency-budget" in bad.stderr


def test_plan_prints_map_hostfile_and_prediction() -> None:
    result = run("plan", "--system", "dgx-h100", "--nodes", "2", "--tp", "8", "--pp", "1", "--dp", "2",
                 "--model", "llama2-7b", "--global-batch", "64")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "node0 slots=8" in out and "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 torchrun" in out
    assert "predicted step" in out and "--tensor-model-parallel-size 8" in out


def test_plan_json_lists_every_rank(tmp_path) -> None:  # type: ignore[no-untyped-def]
    hostfile = tmp_path / "hosts"
    result = run("plan", "--system", "dgx-h100", "--nodes", "2", "--tp", "4", "--pp", "2", "--dp", "2", "--json",
                 "--hosts", "h1,h2", "--write-hostfile", str(hostfile))
    doc = json.loads(result.stdout)
    assert len(doc["ranks"]) == 16 and doc["groups"]["tp"]["nodes"] == 1
    assert doc["launch"]["hostfile"] == "h1 slots=8\nh2 slots=8\n" == hostfile.read_text()
    assert doc["basis"] == "reference" and doc["step_time_s"] is None


@pytest.mark.parametrize(("args", "message"), [
    (["--system", "dgx-h100", "--nodes", "2", "--tp", "8", "--pp", "2", "--dp", "2"], "does not match"),
    (["--system", "no-such-box", "--nodes", "1", "--tp", "8", "--pp", "1", "--dp", "1"], "unknown System"),
    (["--system", "dgx-h100", "--nodes", "1", "--tp", "8", "--pp", "1", "--dp", "1", "--order", "tp-dp"], "--order"),
    (["--system", "dgx-h100", "--nodes", "1", "--tp", "3", "--pp", "1", "--dp", "1"], "does not match"),
])
def test_plan_validation_errors_exit_2(args: list[str], message: str) -> None:
    result = run("plan", *args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_advise_takes_a_gpu_family_as_every_variant_of_it() -> None:
    from linkscope.hardware.loader import load_db

    family = {o.id for o in load_db().offerings.values() if o.system.node.gpu.family_name == "A100"}
    doc = json.loads(run("advise", "infer", "--model", "llama2-7b", "--latency-budget", "20", "--gpu", "A100",
                         "--json", "--all").stdout)
    assert doc["offerings_evaluated"] == len(family)
    assert {r["offering"] for r in doc["rows"]} <= family


ONE_NODE = ["advise", "train", "--model", "llama2-7b", "--tokens", "1B", "--provider", "lambda", "--gpus", "8",
            "--top", "1"]


def test_advise_shows_costs_in_the_chosen_currency_at_the_dated_rate() -> None:
    from linkscope.hardware.currency import rates
    from linkscope.report.money import money_text, shown_currency, showing

    usd = json.loads(run(*ONE_NODE, "--json").stdout)
    eur = json.loads(run(*ONE_NODE, "--json", "--currency", "eur").stdout)
    factor = rates().factor("USD", "EUR")
    assert usd["currency"]["code"] == "USD" and usd["currency"]["per_usd"] == 1.0
    assert eur["currency"]["code"] == "EUR" and eur["currency"]["per_usd"] == pytest.approx(factor, rel=1e-6)
    assert eur["currency"]["rate_as_of"] == rates().as_of.isoformat()
    # Plans are costed and ranked in USD either way; only what is shown changes currency.
    assert [r["cost_usd"] for r in eur["rows"]] == [r["cost_usd"] for r in usd["rows"]]
    text = run(*ONE_NODE, "--currency", "EUR").stdout
    with showing(shown_currency("EUR")):
        cost = money_text(usd["rows"][0]["cost_usd"])
    assert cost.startswith("EUR ") and f"cost {cost}" in text
    assert f"ECB reference rate of {rates().as_of}" in text and "$" not in text


def test_the_budget_is_read_in_the_chosen_currency() -> None:
    cost_usd = json.loads(run(*ONE_NODE, "--json").stdout)["rows"][0]["cost_usd"]
    cny_per_usd = json.loads(run(*ONE_NODE, "--json", "--currency", "CNY").stdout)["currency"]["per_usd"]
    budget = f"{cost_usd * 2:.0f}"  # twice the cost in USD, a quarter of it in CNY
    assert cost_usd * 2 < cost_usd * cny_per_usd
    assert "no plan fits the budget" not in run(*ONE_NODE, "--budget", budget).stdout.lower()
    text = " ".join(run(*ONE_NODE, "--budget", budget, "--currency", "CNY").stdout.split())
    assert f"budget CNY {budget}" in text and "No plan fits the budget (CNY" in text


def test_infer_prices_tokens_in_the_chosen_currency_and_rejects_others() -> None:
    args = ["advise", "infer", "--model", "llama2-7b", "--latency-budget", "20", "--provider", "lambda", "--top", "2"]
    text = run(*args, "--currency", "CNY").stdout
    assert "CNY/Mtok" in text and "$/Mtok" not in text
    bad = run(*args, "--currency", "GBP")
    assert bad.exit_code == 2 and "unknown currency 'GBP'" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_a_tiny_deadline_prints_as_given_and_is_held_to_the_p90() -> None:
    text = " ".join(run(*TRAIN, "--deadline", "0.0001s").stdout.split())
    assert "deadline 0.0001 s, met when a plan's p90 time is within it" in text
    assert "deadline 0 s" not in text and "No plan meets the deadline (0.0001 s) at its p90" in text
