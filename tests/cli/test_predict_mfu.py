"""MFU on the command line names its peak (text and JSON), and a figure above every recorded run is flagged."""

from __future__ import annotations

import json

from linkscope.hardware.loader import load_db
from tests.cli.helpers import run_cli

MI355X_FP8 = ["predict", "train", "-s", "mi355x-8x", "-m", "llama3-70b", "--precision", "fp8", "--gpus", "64"]


def test_an_fp8_job_is_taken_against_the_fp8_peak_and_names_it() -> None:
    result = run_cli(*MI355X_FP8, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    fp8 = load_db(include_user=False).systems["mi355x-8x"].node.gpu.fp8_dense_tflops
    assert data["mfu_precision"] == "fp8" and data["mfu_peak_tflops"] == fp8
    assert 0 < data["mfu"] < 1
    assert abs(data["mfu"] - data["tflops_per_gpu"] / fp8) < 1e-9
    text = run_cli(*MI355X_FP8).stdout
    assert f"{data['mfu']:.1%} of {fp8:,.0f} TFLOP/s FP8 dense" in text


def test_bf16_names_the_bf16_peak_and_flags_mfu_above_every_recorded_run() -> None:
    args = ["predict", "train", "-s", "dgx-a100", "-m", "llama2-70b", "--gpus", "64"]
    data = json.loads(run_cli(*args, "--json").stdout)
    assert data["mfu_precision"] == "bf16" and data["mfu_peak_tflops"] == 312.0
    best = data["mfu_best_recorded"]
    assert best is not None and 0 < best < 1
    flagged = [f for f in data["flags"] if f.startswith("above every recorded A100 BF16 run")]
    assert bool(flagged) == (data["mfu"] > best)
    if flagged:
        assert f"{data['mfu']:.0%} MFU of 312 TFLOP/s BF16 dense" in flagged[0]
        assert "above every recorded A100 BF16" in " ".join(run_cli(*args).stdout.split())


def test_serving_names_its_peak_and_flags_above_every_recorded_serving_run() -> None:
    args = ["predict", "infer", "-s", "dgx-a100", "-m", "llama3-8b", "--batch", "64"]
    data = json.loads(run_cli(*args, "--json").stdout)
    assert data["mfu_precision"] == "bf16" and data["mfu_peak_tflops"] == 312.0
    assert 0 < data["serving_mfu"] < 1
    text = " ".join(run_cli(*args).stdout.split())
    assert f"{data['serving_mfu']:.1%} of 312 TFLOP/s BF16 dense" in text
    for flag in data["flags"]:
        assert flag.startswith("above every recorded A100 BF16 serving run")
        assert "above every recorded A100 BF16 serving run" in text


def test_an_fp8_job_on_a_gpu_without_fp8_is_one_line_and_exit_2() -> None:
    result = run_cli("predict", "train", "-s", "dgx-a100", "-m", "llama3-8b", "--precision", "fp8", "--gpus", "8")
    assert result.exit_code == 2
    assert "FP8" in result.output and "Traceback" not in result.output
