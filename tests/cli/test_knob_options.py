"""`--grad-compression`, `--bucket-mb` and `--zeropp` on predict train, plan and advise train: what they print,
and one line with exit code 2 for a knob the job cannot run."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import run_cli

SYSTEM = ["-s", "gcp/a2-ultragpu-8g", "-m", "llama2-13b", "--gpus", "32"]


@pytest.mark.parametrize("args, needle", [
    (["--grad-compression", "powersgd:4", "--framework", "fsdp"],
     "--grad-compression: powersgd:4 does not run under fsdp"),
    (["--grad-compression", "onebit", "--zero", "3"], "--grad-compression: onebit does not run with ZeRO stage 3"),
    (["--grad-compression", "powersgd:0"], "--grad-compression: PowerSGD rank must be at least 1"),
    (["--grad-compression", "powersgd:6000"], "above the smallest matrix dimension 5120"),
    (["--bucket-mb", "0"], "--bucket-mb: must be above 0"),
    (["--bucket-mb", "1000000"], "--bucket-mb: 1e+06 is above the"),
    (["--zeropp", "qw", "--zero", "1"], "--zeropp: ZeRO++ runs with ZeRO stage 3 only"),
    (["--zeropp", "qz"], "--zeropp: 'qz' must be a comma-separated list"),
])
def test_predict_train_refuses_in_one_line(args: list[str], needle: str) -> None:
    result = run_cli("predict", "train", *SYSTEM, *args)
    assert result.exit_code == 2
    assert needle in result.output and len(result.output.strip().splitlines()) == 1, result.output


def test_predict_train_says_what_the_knob_costs_and_saves() -> None:
    result = run_cli("predict", "train", *SYSTEM, "--dp", "32", "--tp", "1", "--pp", "1", "--global-batch", "256",
                     "--grad-compression", "powersgd:4", "--json")
    doc = json.loads(result.output)
    knobs = doc["knobs"]
    assert knobs["knobs"]["grad_compression"] == "powersgd:4" and doc["parallelism"]["zero"] == 0
    assert knobs["bytes_per_gpu_after"]["scale_out"] < knobs["bytes_per_gpu_before"]["scale_out"]
    assert knobs["memory_gib_added"] > 0 and knobs["knob_compute_s"] > 0 and knobs["saved_s"] > 0
    assert doc["breakdown"]["knob_compute_s"] == pytest.approx(knobs["knob_compute_s"])
    assert any("changes the optimisation" in f for f in doc["flags"])
    text = run_cli("predict", "train", *SYSTEM, "--grad-compression", "bf16", "--bucket-mb", "25").output
    assert "bf16 + bucket 25 MB: data-parallel bytes per GPU per step" in text


def test_plan_and_advise_take_the_knobs() -> None:
    result = run_cli("plan", "-s", "gcp/a2-ultragpu-8g", "--nodes", "4", "-m", "llama2-13b", "--zeropp", "qw,hp")
    assert result.exit_code == 0, result.output
    result = run_cli("plan", "-s", "gcp/a2-ultragpu-8g", "--nodes", "4", "--grad-compression", "fp16")
    assert result.exit_code == 2 and "need --model" in result.output
    result = run_cli("advise", "train", "-m", "llama2-13b", "--tokens", "10B", "--gpus", "32",
                     "--grad-compression", "onebit", "--zeropp", "qw")
    assert result.exit_code == 2 and "onebit does not run with ZeRO stage 3" in result.output


def test_plan_and_advise_say_what_the_knobs_cost_and_save() -> None:
    plan = json.loads(run_cli("plan", "-s", "gcp/a2-ultragpu-8g", "--nodes", "4", "-m", "llama2-13b", "--tp", "1",
                              "--pp", "1", "--dp", "32", "--global-batch", "256", "--grad-compression", "powersgd:4",
                              "--json").output)
    assert plan["knobs"]["label"] == "powersgd:4" and plan["knobs"]["saved_s"] > 0
    advice = json.loads(run_cli("advise", "train", "-m", "llama2-13b", "--tokens", "10B", "--gpus", "32",
                                "--fabric", "tcp", "--grad-compression", "bf16", "--objective", "time",
                                "--json").output)
    assert advice["knobs"]["label"] == "bf16"
    assert sum(advice["knobs"]["bytes_per_gpu_after"].values()) < sum(advice["knobs"]["bytes_per_gpu_before"].values())
