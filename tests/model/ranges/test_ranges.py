"""Every prediction carries its p10..p90 range from the leave-one-source-out errors of its kind."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.ranges.accuracy import accuracy_ranges, rate_range, time_range
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.step.infer import InferJob, estimate_inference, summary
from linkscope.model.step.predict import predict_train
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import model_presets
from tests.cli.helpers import run_cli


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _brackets(value: float, span: tuple[float, float] | list[float]) -> bool:
    return span[0] <= value <= span[1] and span[0] > 0


def test_time_and_rate_ranges_are_inverse() -> None:
    lo, hi = time_range(10.0, "training")
    r = accuracy_ranges()["training"]
    assert lo == pytest.approx(10.0 * np.exp(r.p10_log)) and hi == pytest.approx(10.0 * np.exp(r.p90_log))
    rlo, rhi = rate_range(1.0 / 10.0, "training")
    assert rlo == pytest.approx(1.0 / hi) and rhi == pytest.approx(1.0 / lo)


def test_training_prediction_has_ranges(db: HardwareDB) -> None:
    job = Job(model=model_presets()["llama2-7b"], global_batch=64, seq_len=4096)
    p = predict_train(job, db.systems["dgx-h100"], LayoutRequest(tp=1, pp=1, dp=8))
    assert _brackets(p.step_time_s, p.step_time_s_range)
    assert _brackets(p.tokens_per_s, p.tokens_per_s_range)


def test_collective_and_inference_predictions_have_ranges(db: HardwareDB) -> None:
    row = predict_sizes(db.systems["dgx-h100"], "all_reduce", [1 << 20])[0]
    assert _brackets(row.time_us, row.time_us_range)
    job = InferJob(model=model_presets()["llama2-13b"], tp=1, pp=1, input_tokens=1024, output_tokens=256)
    system = db.systems["dgx-h100"]
    data = summary(job, system, estimate_inference(job, system, np.asarray([8])), 0)
    assert _brackets(data["tokens_per_s_per_gpu"], data["tokens_per_s_per_gpu_range"])
    assert _brackets(data["time_per_output_token_s"], data["time_per_output_token_s_range"])


def test_ranges_reach_the_json_and_the_tables() -> None:
    result = run_cli("predict", "train", "--system", "dgx-a100", "--gpus", "8", "--model", "llama2-7b",
                     "--global-batch", "64", "--json")
    data = json.loads(result.stdout)
    assert _brackets(data["step_time_s"], data["step_time_s_range"])
    table = run_cli("predict", "collective", "--system", "dgx-h100", "--bytes", "1M").stdout
    assert "range" in table and "%" in table
