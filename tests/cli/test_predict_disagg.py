"""`predict infer --disaggregated` on the command line: JSON, the table beside colocated serving, one-line errors."""

from __future__ import annotations

import json
import math

import pytest

from tests.cli.helpers import run_cli

BASE = ["predict", "infer", "-s", "dgx-h100", "-m", "llama3-70b", "--disaggregated", "--input-tokens", "8192",
        "--output-tokens", "512"]


def test_json_has_ttft_pieces_tpot_kv_and_the_colocated_answer() -> None:
    result = run_cli(*BASE, "--nodes", "2", "--prefill-gpus", "8", "--decode-gpus", "8", "--tp", "8",
                     "--latency-budget", "30", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("ttft_s", "prefill_queue_s", "prefill_s", "kv_transfer_s", "tpot_s", "tokens_per_s_per_gpu",
                "requests_per_s"):
        assert math.isfinite(data[key]) and data[key] >= 0, key
    assert data["kv"]["path"] == "rdma" and data["kv"]["bytes_per_request"] == 8192 * 320 * 1024
    assert data["bottleneck"] in ("prefill", "kv", "decode")
    assert set(data["utilisation"]) == {"prefill", "kv", "decode"}
    assert data["colocated"]["tokens_per_s_per_gpu"] > 0
    assert data["verdict"]["winner"] in ("disaggregated", "colocated")
    assert data["tokens_per_s_per_user"] >= 30


def test_instances_set_the_pools_and_the_table_names_the_bottleneck() -> None:
    result = run_cli(*BASE, "--prefill-instances", "1", "--decode-instances", "1", "--tp", "4", "--batch", "16")
    assert result.exit_code == 0, result.output
    assert "KV over nvlink" in result.output and "bottleneck:" in result.output and "verdict:" in result.output
    assert "colocated" in result.output


@pytest.mark.parametrize(("extra", "words"), [
    (["--prefill-gpus", "8", "--decode-gpus", "8", "--tp", "8"], "larger than dgx-h100's 8 GPUs"),
    (["--prefill-gpus", "6", "--decode-gpus", "2", "--prefill-tp", "4", "--decode-tp", "2"],
     "--prefill-tp: tp 4 does not divide the prefill pool of 6 GPUs"),
    (["--nodes", "2", "--prefill-gpus", "8", "--decode-gpus", "8", "--tp", "8", "--kv-transport", "nvlink"],
     "--kv-transport: nvlink: the prefill and decode pools (8 + 8 GPUs) do not share an NVLink domain"),
    (["--prefill-gpus", "4", "--decode-gpus", "4", "--tp", "4", "--block-tokens", "0"],
     "--block-tokens: must be between 1 and the context of 8704 tokens (got 0)"),
    (["--prefill-gpus", "4", "--decode-gpus", "4", "--tp", "4", "--block-tokens", "100000"],
     "--block-tokens: must be between 1 and the context"),
    (["--prefill-gpus", "4", "--tp", "4"], "needs --decode-gpus or --decode-instances"),
    (["--prefill-gpus", "4", "--prefill-instances", "2", "--decode-gpus", "4", "--tp", "4"], "disagree"),
    (["--prefill-gpus", "4", "--decode-gpus", "4", "--tp", "auto"], "--tp auto"),
    (["--prefill-gpus", "4", "--decode-gpus", "4", "--tp", "4", "--kv-transport", "carrier-pigeon"],
     "--kv-transport"),
    (["--prefill-gpus", "-4", "--decode-gpus", "4", "--tp", "4"], "--prefill-gpus"),
    (["--prefill-gpus", "4", "--decode-gpus", "4", "--tp", "4", "--qps", "1e6"], "--qps"),
])
def test_bad_input_is_one_line_and_exit_2(extra: list[str], words: str) -> None:
    result = run_cli(*BASE, *extra)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output


ADVISE = ["advise", "infer", "--disaggregated", "-m", "llama3-70b", "--latency-budget", "30", "--input-tokens",
          "8192", "--output-tokens", "512", "--provider", "aws", "--gpu", "H100"]


def test_advise_prints_the_frontier_and_when_colocated_wins() -> None:
    result = run_cli(*ADVISE, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["frontier"] and data["no_plan"] is None
    assert {p["kind"] for p in data["frontier"]} <= {"colocated", "disaggregated"}
    assert all(o["winner"] in ("colocated", "disaggregated", None) for o in data["offerings"])
    text = run_cli(*ADVISE).output
    assert "colocated serving is cheaper per token on" in text


def test_advise_with_a_ttft_budget_no_plan_meets_exits_0_with_the_fastest() -> None:
    result = run_cli(*ADVISE, "--ttft-budget", "0.001")
    assert result.exit_code == 0, result.output
    assert "no plan meets TTFT 0.001 s: the fastest gives" in result.output


def test_advise_compares_the_kv_links() -> None:
    result = run_cli(*ADVISE, "--compare-interconnect", "--price-per-gpu-hour", "3")
    assert result.exit_code == 0, result.output
    for words in ("colocated", "nvlink", "rdma", "tcp"):
        assert words in result.output


@pytest.mark.parametrize(("extra", "words"), [
    (["--ttft-budget", "0"], "--ttft-budget"),
    (["--ttft-budget", "nan"], "--ttft-budget"),
    (["--block-tokens", "-1"], "--block-tokens"),
    (["--kv-granularity", "page"], "--kv-granularity"),
])
def test_advise_bad_input_is_one_line_and_exit_2(extra: list[str], words: str) -> None:
    result = run_cli(*ADVISE, *extra)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args", [
    ["predict", "infer", "-s", "dgx-h100", "-m", "llama3-70b", "--prefill-gpus", "4"],
    ["predict", "infer", "-s", "dgx-h100", "-m", "llama3-70b", "--kv-transport", "rdma"],
    ["advise", "infer", "-m", "llama3-70b", "--latency-budget", "30", "--ttft-budget", "1"],
])
def test_a_disaggregated_option_without_disaggregated_is_refused(args: list[str]) -> None:
    result = run_cli(*args)
    assert result.exit_code == 2 and "needs --disaggregated" in result.output
