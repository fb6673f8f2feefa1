"""`predict moe` and MoE training on the command line: JSON keys, tables, and one-line errors with exit 2."""

from __future__ import annotations

import json
import math

import pytest

from tests.cli.helpers import run_cli

MOE = ["predict", "moe", "-s", "dgx-h100", "--tokens-per-rank", "4096", "--hidden", "7168", "--topk", "8",
       "--experts", "256"]


def test_json_has_dispatch_and_combine_with_ranges() -> None:
    result = run_cli(*MOE, "--ep", "16", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("dispatch_us", "combine_us", "dispatch_gb_per_s", "combine_gb_per_s", "bytes_per_rank"):
        assert math.isfinite(data[key]) and data[key] > 0, key
    lo, hi = data["dispatch_us_range"]
    assert lo < data["dispatch_us"] < hi
    assert data["nodes"] == 2


def test_crossing_nodes_is_slower_than_staying_on_nvlink() -> None:
    inside = json.loads(run_cli(*MOE, "--ep", "8", "--json").stdout)
    across = json.loads(run_cli(*MOE, "--ep", "16", "--json").stdout)
    assert across["dispatch_gb_per_s"] < inside["dispatch_gb_per_s"]


@pytest.mark.parametrize(("extra", "words"), [
    (["--ep", "8", "--topk", "300"], "--topk 300 is larger than --experts 256"),
    (["--ep", "12"], "--ep 12 does not divide the 256 experts"),
    (["--ep", "8", "--tokens-per-rank", "0"], "--tokens-per-rank"),
    (["--ep", "8", "--tokens-per-rank", "-3"], "--tokens-per-rank"),
    (["--ep", "8", "--kernel", "deepep"], "--kernel"),
    (["--ep", "8", "--precision", "fp4"], "--precision"),
])
def test_bad_input_is_one_line_and_exit_2(extra: list[str], words: str) -> None:
    result = run_cli(*MOE, *extra)
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output


def test_ep_that_does_not_fill_nodes_names_ep() -> None:
    result = run_cli("predict", "moe", "-s", "dgx-h100", "--tokens-per-rank", "64", "--hidden", "1024", "--topk",
                     "2", "--experts", "48", "--ep", "12")
    assert result.exit_code == 2 and "--ep 12 does not fill whole nodes" in result.output


def test_train_prints_the_expert_layout_and_rejects_ep_on_a_dense_model() -> None:
    result = run_cli("predict", "train", "-s", "dgx-h100", "--nodes", "2", "-m", "mixtral-8x7b", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["parallelism"]["ep"] >= 1 and data["expert_layout"]
    assert data["total_params"] > data["active_params"]
    dense = run_cli("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--ep", "2")
    assert dense.exit_code == 2 and "no experts" in dense.output
    bad = run_cli("predict", "train", "-s", "dgx-h100", "-m", "mixtral-8x7b", "--moe-dispatcher", "pplx")
    assert bad.exit_code == 2 and "--moe-dispatcher" in bad.output


def test_plan_and_advise_train_honour_the_expert_parallelism_given() -> None:
    plan = run_cli("plan", "-s", "dgx-h100", "--nodes", "2", "-m", "mixtral-8x7b", "--ep", "2", "--json")
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["layout"]["ep"] == 2
    advise = run_cli("advise", "train", "-m", "mixtral-8x7b", "--tokens", "1B", "--gpus", "16", "--provider",
                     "lambda", "--ep", "4", "--json")
    assert advise.exit_code == 0, advise.output
    assert "EP 4" in advise.stdout or '"ep": 4' in advise.stdout
    bad = run_cli("plan", "-s", "dgx-h100", "--nodes", "2", "-m", "mixtral-8x7b", "--ep", "3")
    assert bad.exit_code == 2 and "--ep: 3 does not divide the 8 experts" in bad.output


DECODE = ["predict", "moe", "--tokens-per-rank", "128", "--hidden", "7168", "--topk", "8", "--experts", "288"]


def test_the_output_states_the_transport_auto_chose() -> None:
    result = run_cli(*DECODE, "-s", "aws/p5en.48xlarge", "--ep", "16", "--kernel", "uccl-ep-ll")
    assert result.exit_code == 0, result.output
    assert "uccl-ep-ll over efa" in result.output
    assert "transport efa (auto: the System's fabric is EFA)" in result.output
    data = json.loads(run_cli(*DECODE, "-s", "dgx-h100", "--ep", "16", "--kernel", "low-latency", "--json").stdout)
    assert (data["kernel"], data["transport"]) == ("deepep-ll", "ibgda")


@pytest.mark.parametrize(("extra", "words"), [
    (["-s", "dgx-h100", "--transport", "efa"], "--transport efa runs over efa; dgx-h100's fabric is infiniband"),
    (["-s", "gcp/a3-highgpu-8g", "--transport", "ibgda"], "--transport ibgda runs over infiniband or roce"),
    (["-s", "aws/p5en.48xlarge", "--kernel", "deepep-ll"], "--kernel deepep-ll cannot run on --transport efa"),
    (["-s", "dgx-h100", "--kernel", "nccl", "--transport", "ibgda"], "--kernel nccl cannot run on --transport ibgda"),
    (["-s", "dgx-h100", "--transport", "tcp"], "--transport must be one of auto, ibgda, proxy, efa, nvlink"),
])
def test_a_transport_the_system_or_kernel_cannot_run_is_one_line_exit_2(extra: list[str], words: str) -> None:
    result = run_cli(*DECODE, "--ep", "16", *extra)
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_predict_infer_with_ep_states_kernel_and_transport_and_follows_the_system() -> None:
    efa = run_cli("predict", "infer", "-s", "aws/p5en.48xlarge", "-m", "deepseek-v3", "--ep", "16", "--tp", "1",
                  "--batch", "64", "--json")
    assert efa.exit_code == 0, efa.output
    data = json.loads(efa.stdout)
    # DeepEP's low-latency kernel cannot run on EFA: its drop-in UCCL-EP runs, through the host proxy.
    assert (data["moe_kernel"], data["moe_transport"]) == ("uccl-ep-ll", "efa")
    ib = json.loads(run_cli("predict", "infer", "-s", "hgx-h200", "-m", "deepseek-v3", "--ep", "16", "--tp", "1",
                            "--batch", "64", "--json").stdout)
    proxy = json.loads(run_cli("predict", "infer", "-s", "hgx-h200", "-m", "deepseek-v3", "--ep", "16", "--tp", "1",
                               "--batch", "64", "--transport", "proxy", "--json").stdout)
    assert (ib["moe_kernel"], ib["moe_transport"]) == ("deepep-ll", "ibgda")
    assert proxy["moe_transport"] == "proxy" and proxy["tpot_s"] > ib["tpot_s"]
    bad = run_cli("predict", "infer", "-s", "hgx-h200", "-m", "deepseek-v3", "--ep", "16", "--tp", "1",
                  "--transport", "efa")
    assert bad.exit_code == 2 and "--transport efa runs over efa" in bad.output


def test_predict_train_and_advise_take_the_transport() -> None:
    train = run_cli("predict", "train", "-s", "dgx-h100", "--nodes", "2", "-m", "mixtral-8x7b", "--ep", "8",
                    "--transport", "proxy", "--json")
    assert train.exit_code == 0, train.output
    assert "over" in json.loads(train.stdout)["expert_layout"]
    bad = run_cli("predict", "train", "-s", "dgx-h100", "-m", "mixtral-8x7b", "--transport", "rdma")
    assert bad.exit_code == 2 and "--transport" in bad.output
    advise = run_cli("advise", "train", "-m", "mixtral-8x7b", "--tokens", "1B", "--gpus", "16", "--provider", "aws",
                     "--transport", "ibgda", "--all")
    assert advise.exit_code == 0, advise.output
    assert "--transport ibgda runs over infiniband or roce" in advise.output
