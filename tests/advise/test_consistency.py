"""One job on one offering: `predict train`, every `predict scaling` row, `plan` and `advise` give one step time.

Each command resolves `--system` through the same function (`model.calibration.systems.resolve`), so the
same offering, GPU count, job and layout must price the same; a command that resolved it its own way would
show here as a difference.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.helpers import run_cli

OFFERING = "aws/p5.48xlarge"
MODEL = "llama2-7b"
SEQ_LEN = "4096"
TOLERANCE = 0.005


def _json(*args: str) -> Any:
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _layout_flags(par: dict[str, Any]) -> list[str]:
    return ["--tp", str(par["tp"]), "--pp", str(par["pp"]), "--dp", str(par["dp"]), "--cp", str(par["cp"])]


def _train(gpus: int, global_batch: int, *extra: str) -> dict[str, Any]:
    return _json("predict", "train", "-s", OFFERING, "-m", MODEL, "--gpus", str(gpus), "--seq-len", SEQ_LEN,
                 "--global-batch", str(global_batch), *extra)


@pytest.fixture(scope="module")
def scaling() -> dict[str, Any]:
    return _json("predict", "scaling", "-s", OFFERING, "-m", MODEL, "--nodes", "2", "--seq-len", SEQ_LEN)


def test_each_scaling_row_is_predict_train_on_its_gpus(scaling: dict[str, Any]) -> None:
    assert [p["nodes"] for p in scaling["points"]] == [1, 2]
    for point in scaling["points"]:
        train = _train(point["gpus"], point["global_batch"])
        assert point["step_time_s"] == pytest.approx(train["step_time_s"], rel=TOLERANCE)
        assert point["parallelism"] == train["parallelism"]


def test_advise_plan_and_predict_train_agree_on_the_same_layout(scaling: dict[str, Any]) -> None:
    top = scaling["points"][-1]
    advice = _json("advise", "train", "-m", MODEL, "--tokens", "1B", "--gpus", "16", "--seq-len", SEQ_LEN,
                   "--global-batch", str(top["global_batch"]), "--provider", "aws", "--all")
    row = next(r for r in advice["rows"] if r["offering"] == OFFERING)
    assert row["feasible"], row
    par = row["parallelism"]
    train = _train(16, top["global_batch"], *_layout_flags(par), "--micro-batch", str(par["micro_batch"]),
                   "--interleave", str(par["interleave"]), "--recompute", par["recompute"], "--zero", str(par["zero"]))
    plan = _json("plan", "-s", OFFERING, "--nodes", "2", "-m", MODEL, "--seq-len", SEQ_LEN,
                 "--global-batch", str(top["global_batch"]), *_layout_flags(par),
                 "--micro-batch", str(par["micro_batch"]), "--zero", str(par["zero"]), "--order", "tp-cp-dp-pp")
    assert train["parallelism"] == par
    for step_time_s in (row["step_time_s"], plan["step_time_s"], top["step_time_s"]):
        assert step_time_s == pytest.approx(train["step_time_s"], rel=TOLERANCE)


def test_the_issue_case_scaling_row_predict_train_and_plan_agree_at_64_gpus() -> None:
    # dgx-h100, llama2-70b, 64 GPUs, default job (~4M tokens per step): the 8-node row of `predict scaling` is
    # `predict train --gpus 64` (same layout searched), and `plan` on that layout prices it the same.
    scaling = _json("predict", "scaling", "-s", "dgx-h100", "-m", "llama2-70b", "--nodes", "8")
    row = scaling["points"][-1]
    assert (row["nodes"], row["gpus"], row["fits"]) == (8, 64, True)
    train = _json("predict", "train", "-s", "dgx-h100", "-m", "llama2-70b", "--gpus", "64")
    assert row["global_batch"] == train["global_batch"]
    assert row["step_time_s"] == pytest.approx(train["step_time_s"], rel=TOLERANCE)
    par = train["parallelism"]
    assert row["parallelism"] == par
    plan = _json("plan", "-s", "dgx-h100", "--nodes", "8", "-m", "llama2-70b", "--global-batch",
                 str(train["global_batch"]), *_layout_flags(par), "--micro-batch", str(par["micro_batch"]),
                 "--zero", str(par["zero"]), "--order", "tp-cp-dp-pp")
    assert plan["step_time_s"] == pytest.approx(train["step_time_s"], rel=TOLERANCE)
