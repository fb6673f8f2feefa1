"""One name, one meaning: the options several commands share behave the same in each of them."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import run_cli

PLAN_16 = ["plan", "-s", "dgx-h100", "--nodes", "2"]


def _json(*args: str) -> dict:
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_short_system_and_model_work_wherever_the_options_exist() -> None:
    assert run_cli(*PLAN_16, "--tp", "8", "--pp", "1", "--dp", "2", "-m", "llama2-7b").exit_code == 0
    advise = run_cli("advise", "train", "-m", "llama2-7b", "--tokens", "1e9", "--gpus", "8", "--top", "1")
    assert advise.exit_code == 0, advise.output
    assert run_cli("advise", "infer", "-m", "llama2-7b", "--latency-budget", "20", "--top", "1").exit_code == 0


def test_global_batch_defaults_to_about_4m_tokens_in_predict_as_in_advise() -> None:
    predicted = _json("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b")
    assert predicted["global_batch"] * predicted["seq_len"] == 1024 * 4096
    text = run_cli("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b")
    assert "global batch 1024 x seq len 4096" in " ".join(text.output.split())


def test_scaling_global_batch_is_the_whole_job_at_the_largest_count() -> None:
    weak = _json("predict", "scaling", "-s", "dgx-a100", "-m", "llama2-7b", "--nodes", "4", "--global-batch", "64")
    assert [p["global_batch"] for p in weak["points"]] == [16, 32, 64]
    strong = _json("predict", "scaling", "-s", "dgx-a100", "-m", "llama2-7b", "--nodes", "4", "--global-batch",
                   "64", "--strong")
    assert {p["global_batch"] for p in strong["points"]} == {64}


def test_infer_tp_auto_picks_the_best_tp_that_fits() -> None:
    auto = _json("predict", "infer", "-s", "dgx-h100", "-m", "llama2-70b", "--tp", "auto", "--latency-budget", "20")
    assert auto["memory_gib_per_gpu"] < 80
    for tp in ("1", "2", "4", "8"):
        fixed = run_cli("predict", "infer", "-s", "dgx-h100", "-m", "llama2-70b", "--tp", tp, "--latency-budget",
                        "20", "--json")
        if fixed.exit_code == 0 and json.loads(fixed.stdout)["memory_gib_per_gpu"] < 80:
            assert json.loads(fixed.stdout)["tokens_per_s_per_gpu"] <= auto["tokens_per_s_per_gpu"] + 1e-9


def test_infer_lengths_default_the_same_as_advise() -> None:
    predicted = _json("predict", "infer", "-s", "dgx-h100", "-m", "llama2-7b")
    assert (predicted["input_tokens"], predicted["output_tokens"]) == (2048, 512)


def test_plan_searches_auto_sizes_with_a_model() -> None:
    data = _json(*PLAN_16, "-m", "llama2-13b")
    par = data["parallelism"]
    assert par["tp"] * par["pp"] * par["dp"] * par["cp"] == 16
    assert data["layout"]["tp"] == par["tp"] and data["layout"]["pp"] == par["pp"]


@pytest.mark.parametrize("args, needle", [
    (["--tp", "auto", "--pp", "1", "--dp", "2"], "needs --model"),
    (["--tp", "8", "--pp", "1", "--dp", "2", "--zero", "4"], "--zero: must be 0, 1, 2 or 3"),
    (["--tp", "x", "--pp", "1", "--dp", "2"], "--tp: expected a positive integer or 'auto'"),
    (["--tp", "0", "--pp", "1", "--dp", "2"], "--tp must be between 1 and"),
])
def test_plan_rejects_bad_sizes_in_one_line(args: list[str], needle: str) -> None:
    result = run_cli(*PLAN_16, *args)
    assert result.exit_code == 2 and needle in result.output and "Traceback" not in result.output


def test_plan_prices_zero3_per_layer_gathers() -> None:
    base = [*PLAN_16, "--tp", "8", "--pp", "1", "--dp", "2", "-m", "llama2-13b", "--micro-batch", "1"]
    zero1, zero3 = _json(*base, "--zero", "1"), _json(*base, "--zero", "3")
    assert zero3["layout"]["zero"] == 3
    assert zero3["groups"]["dp"]["time_s"] > zero1["groups"]["dp"]["time_s"]
    # The framework the step times assume: by ZeRO stage unless --framework says otherwise.
    assert (zero1["framework"], zero3["framework"]) == ("megatron", "fsdp")
    assert _json(*base, "--zero", "2", "--framework", "fsdp")["framework"] == "fsdp"
    # ZeRO-2 reduce-scatters every micro-batch: more DP time than ZeRO-1's once per step.
    assert _json(*base, "--zero", "2")["groups"]["dp"]["time_s"] > zero1["groups"]["dp"]["time_s"]


def test_plan_prints_the_job_it_assumed() -> None:
    result = run_cli(*PLAN_16, "--tp", "8", "--pp", "1", "--dp", "2", "-m", "llama2-7b", "--seq-len", "2048")
    assert "global batch 2048 x seq len 2048" in " ".join(result.output.split())


@pytest.mark.parametrize("command", [["catalog"], ["export", "nope"]])
def test_json_and_csv_exclude_each_other_everywhere(command: list[str]) -> None:
    result = run_cli(*command, "--json", "--csv")
    assert result.exit_code == 2 and "choose one format: --json or --csv" in result.output


JOB_OPTIONS = ["--precision", "fp8", "--recompute", "selective", "--interleave", "2", "--attention", "flash2",
               "--no-dp-overlap", "--tp-comm-overlap", "--framework", "megatron"]


def test_plan_takes_the_job_options_predict_train_takes_and_answers_the_same() -> None:
    # One declaration per option: plan and predict train read the same flags into the same job and layout.
    sizes = ["--tp", "4", "--pp", "2", "--dp", "2"]
    planned = _json(*PLAN_16, "-m", "llama2-7b", *sizes, *JOB_OPTIONS)
    predicted = _json("predict", "train", "-s", "dgx-h100", "--gpus", "16", "-m", "llama2-7b", *sizes, *JOB_OPTIONS)
    assert planned["layout"] == predicted["parallelism"]
    assert planned["layout"]["recompute"] == "selective" and planned["layout"]["interleave"] == 2
    assert planned["predict_train"]["step_time_s"] == predicted["step_time_s"]
    assert planned["step_time_s"] == pytest.approx(predicted["step_time_s"] + sum(planned["moves_s"].values()),
                                                   rel=1e-12)
    for flag, bad, needle in (("--precision", "fp4", "--precision: 'fp4' is not one of"),
                              ("--recompute", "some", "--recompute: 'some' is not one of"),
                              ("--attention", "xformers", "--attention: 'xformers' is not one of")):
        result = run_cli(*PLAN_16, "-m", "llama2-7b", flag, bad)
        assert result.exit_code == 2 and needle in result.output and "Traceback" not in result.output


def test_plan_in_fp8_needs_fp8_tensor_cores() -> None:
    assert _json(*PLAN_16, "-m", "llama2-13b", "--precision", "fp8")["step_time_s"] > 0
    refused = run_cli("plan", "-s", "dgx-a100", "--nodes", "2", "-m", "llama2-13b", "--precision", "fp8")
    assert refused.exit_code == 2 and "A100-SXM4-80GB has no FP8 tensor cores" in refused.output
    assert "Traceback" not in refused.output


def test_plan_json_lists_every_group_with_its_tier_and_exposed_time() -> None:
    doc = _json(*PLAN_16, "-m", "mixtral-8x7b", "--ep", "8")
    groups = doc["groups"]
    assert set(groups) == {"tp", "cp", "pp", "dp", "ep"}
    assert all({"ranks", "nodes", "tier", "time_s", "collectives"} <= set(g) for g in groups.values())
    assert groups["ep"]["ranks"] == 8 and groups["ep"]["collectives"][0]["op"] == "all_to_all"
    assert set(doc["baseline_groups"]) == set(groups) == set(doc["predict_train"]["groups"])
