"""`predict scaling`: strong scaling holds the baseline's layout, and every efficiency above 100% says why."""

from __future__ import annotations

from dataclasses import replace

import pytest

from linkscope.hardware.loader import load_db
from linkscope.model.calibration.systems import ResolvedSystem
from linkscope.model.step.job import Job
from linkscope.model.step.predict import predict_train
from linkscope.model.step.scaling import SUPERLINEAR_EFFICIENCY, held, predict_scaling
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.transformer import model_presets


@pytest.fixture(scope="module")
def db():  # type: ignore[no-untyped-def]
    return load_db([])


def test_strong_scaling_holds_the_baselines_layout_and_only_dp_grows(db) -> None:  # type: ignore[no-untyped-def]
    # The case: searched afresh, 4..16 nodes chose other micro-batches, recomputation and ep than the
    # memory-bound 2-node baseline and showed 124.8% efficiency. Held, the efficiency is the scaling's alone.
    job = Job(model=model_presets()["mixtral-8x7b"], global_batch=1024, seq_len=4096)
    resolved = ResolvedSystem.plain(db.systems["dgx-h100"])
    points, note = predict_scaling(job, resolved, 16, LayoutRequest(), strong=True)
    base = next(p for p in points if p.fits)
    assert base.nodes == 2 and base.parallelism is not None
    assert "strong scaling holds the baseline's layout" in note and "only dp grows" in note
    for p in points[points.index(base):]:
        assert p.parallelism is not None and replace(p.parallelism, dp=base.parallelism.dp) == base.parallelism
        assert p.efficiency is not None and p.efficiency <= SUPERLINEAR_EFFICIENCY
        alone = predict_train(job, resolved.system.with_nodes(p.nodes), held(base.parallelism))
        assert p.step_time_s == alone.step_time_s
    assert "above 100%" not in note


@pytest.mark.parametrize("system_id, model, strong", [
    ("dgx-h100", "llama2-7b", False), ("mi300x-8x", "qwen3-30b-a3b", False), ("dgx-a100", "llama2-7b", False),
    ("dgx-h100", "llama2-7b", True), ("mi300x-8x", "qwen3-30b-a3b", True),
])
def test_every_efficiency_above_100_percent_is_explained(db, system_id: str, model: str, strong: bool) -> None:  # type: ignore[no-untyped-def]
    job = Job(model=model_presets()[model], global_batch=1024, seq_len=4096)
    points, note = predict_scaling(job, ResolvedSystem.plain(db.systems[system_id]), 16, LayoutRequest(),
                                   strong=strong)
    for p in points:
        if (p.efficiency or 0.0) > SUPERLINEAR_EFFICIENCY:
            clause = next(c for c in note.split("; ") if c.startswith("efficiency above 100% at ")
                          and str(p.nodes) in c.split(" nodes:")[0].removeprefix("efficiency above 100% at ")
                          .split(", "))
            assert "the layout differs from the baseline's (" in clause or "takes a smaller share" in clause


def test_weak_scaling_names_the_micro_batch_that_more_memory_allows(db) -> None:  # type: ignore[no-untyped-def]
    job = Job(model=model_presets()["qwen3-30b-a3b"], global_batch=1024, seq_len=4096)
    points, note = predict_scaling(job, ResolvedSystem.plain(db.systems["mi300x-8x"]), 16, LayoutRequest())
    assert points[1].efficiency is not None and points[1].efficiency > SUPERLINEAR_EFFICIENCY
    assert points[0].parallelism is not None and points[1].parallelism is not None
    first, second = points[0].parallelism.micro_batch, points[1].parallelism.micro_batch
    assert first != second and f"micro-batch {first} -> {second}" in note
