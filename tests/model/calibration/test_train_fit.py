"""The training step model fitted to measured steps: what it recovers, and how it predicts held-back points.

The hold-out fixture (tests/fixtures/train/calibration_points.json) is real: `benchmarks/train_calibration.py
--write` measured every point on 1 and 2 gloo ranks of this repository's 2-core development VM, three
interleaved rounds each, as stored by `bench train`.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.model.step.scaled import scaled_model
from linkscope.model.calibration.train_fit import (TrainFit, TrainShape, fastest_by_label, features, fit_train,
                                       measured_points)
from linkscope.model.step.transformer import load_model

FIXTURE = Path(__file__).parents[2] / "fixtures" / "train" / "calibration_points.json"


def _shape(layers: int, hidden: int, ranks: int, zero: int = 0) -> TrainShape:
    m = scaled_model(load_model("llama2-7b"), layers=layers, hidden=hidden, heads=hidden // 32, vocab=1024,
                     seq_len=128)
    return TrainShape(model=m, micro_batch=2, ranks=ranks, zero=zero)


def test_the_fit_recovers_rates_that_generated_the_times() -> None:
    truth = {"flops": 2e-11, "layer_passes": 1e-3, "params": 0.0, "bus_bytes": 5e-9, "collective_calls": 3e-3,
             "step": 2e-3}
    shapes = [_shape(n, h, r, z) for n in (2, 4) for h in (128, 256) for r in (1, 2) for z in (0, 3)]
    times = [sum(truth[k] * v for k, v in features(s).items()) for s in shapes]
    fit = fit_train(shapes, times)
    assert fit.median_error < 1e-6
    held = _shape(3, 192, 2, 3)
    assert fit.predict_s(held) == pytest.approx(sum(truth[k] * v for k, v in features(held).items()), rel=1e-6)


def test_one_configuration_fits_one_flop_rate() -> None:
    fit = fit_train([_shape(2, 128, 2)], [0.05])
    assert [k for k, v in fit.coefficients.items() if v] == ["flops"]
    assert fit.predict_s(_shape(2, 128, 2)) == pytest.approx(0.05)
    assert TrainFit.from_dict(fit.as_dict()) == fit


def test_nothing_to_fit_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no measured training steps"):
        fit_train([], [])


def _hold_out_errors(one_rank_only: bool) -> list[float]:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    best = fastest_by_label(data["points"])
    keep = (lambda label: "-1r-" in label) if one_rank_only else (lambda label: True)
    calib = [p for p in best if p["label"] in data["calibrate"] and keep(p["label"])]
    held = [p for p in best if p["label"] in data["hold_out"] and keep(p["label"])]
    fit = fit_train(*measured_points(calib))
    shapes, times = measured_points(held)
    return [abs(fit.predict_s(s) - t) / t for s, t in zip(shapes, times)]


def test_held_back_widths_and_depths_are_predicted_within_10_percent_median() -> None:
    # Calibrated on 3 shapes, predicting 3 other widths and depths on one CPU rank.
    errors = _hold_out_errors(one_rank_only=True)
    assert len(errors) == 3
    assert statistics.median(errors) <= 0.10


def test_held_back_rank_counts_and_fsdp_are_predicted_within_10_percent_median() -> None:
    # Calibrated on 8 points, predicting other widths and depths, 1 or 2 ranks, DDP and FSDP (ZeRO-3).
    errors = _hold_out_errors(one_rank_only=False)
    assert len(errors) == 6
    assert statistics.median(errors) <= 0.10


def test_fsdp_pays_for_its_per_layer_collectives() -> None:
    # ZeRO-3 issues 3 collectives per wrapped unit (each layer and the root), DDP one per bucket.
    ddp, fsdp = _shape(4, 128, 2), _shape(4, 128, 2, zero=3)
    assert features(ddp)["collective_calls"] == 1 + 1  # 4.2 MB of fp32 gradients: the 1 MiB first bucket + one
    assert features(fsdp)["collective_calls"] == 3 * (4 + 1)
    assert features(_shape(4, 128, 1))["collective_calls"] == 0


def test_tensor_parallel_inside_data_parallel_counts_both_groups() -> None:
    m = _shape(4, 128, 4).model
    tp_only = TrainShape(model=m, micro_batch=2, ranks=2, tp=2)
    both = TrainShape(model=m, micro_batch=2, ranks=4, tp=2)
    assert both.dp == 2
    assert features(tp_only)["collective_calls"] == 4 * 4
    assert features(both)["collective_calls"] > features(tp_only)["collective_calls"]
    assert features(both)["bus_bytes"] > features(tp_only)["bus_bytes"]
