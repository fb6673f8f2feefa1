"""A training step is never faster than its model FLOPs at the dense peak of its format: held there, flagged."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.hardware.loader import load_db
from linkscope.hardware.specs import GpuSpec
from linkscope.model.step import predict as predict_module
from linkscope.model.step import train
from linkscope.model.step.job import Job
from linkscope.model.ranges.mfu import MfuPeak, mfu_peak
from linkscope.model.step.predict import predict_train
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.transformer import model_presets

REQUEST = LayoutRequest(tp=1, pp=1, cp=1, interleave=1, micro_batch=1, recompute="none", zero=1)


def _job() -> Job:
    return Job(model=model_presets()["llama3-8b"], global_batch=16, seq_len=4096)


def test_a_normal_step_is_not_held() -> None:
    p = predict_train(_job(), load_db(include_user=False).systems["dgx-h100"], REQUEST)
    assert 0 < p.mfu < 1 and all("held" not in f for f in p.physical_flags)


def test_a_step_faster_than_the_peak_allows_is_held_at_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A datasheet peak a tenth of the one the step model computes at (what a wrong constant would look like):
    the step comes out at exactly 100% MFU of it and says so."""
    def tenth(gpu: GpuSpec, precision: str) -> MfuPeak:
        peak = mfu_peak(gpu, precision)
        return dataclasses.replace(peak, tflops=peak.tflops / 10)

    monkeypatch.setattr(train, "mfu_peak", tenth)
    monkeypatch.setattr(predict_module, "mfu_peak", tenth)
    system = load_db(include_user=False).systems["dgx-h100"]
    p = predict_train(_job(), system, REQUEST)
    assert p.mfu == pytest.approx(1.0)
    assert p.mfu_peak_tflops == pytest.approx(system.node.gpu.dense_tflops("bf16") / 10)
    assert any("held at that bound (100% MFU)" in f for f in p.physical_flags)
    assert set(p.physical_flags) <= set(p.flags)
