"""Calibrating the training step model on CPU ranks and predicting configurations it has not seen.

Measures a grid of small decoders on local gloo ranks (widths, depths, 1 or 2 ranks, DDP or FSDP) as one
`bench train` run, fits the step model (model/calibration/train_fit.py) on the calibration half and prints the
error on the held-back half (target: median <= 10%). `--write FILE` saves the measured points, the form
tests/fixtures/train/calibration_points.json has.

    python benchmarks/train_calibration.py [--write tests/fixtures/train/calibration_points.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from linkscope.bench.config import RunOptions
from linkscope.bench.train.config import TrainConfig
from linkscope.model.step.scaled import scaled_model
from linkscope.model.calibration.train_fit import fastest_by_label, fit_train, measured_points
from linkscope.model.step.transformer import load_model
from linkscope.traincheck.session import TrainRequest, prepare_plans, same_threads
from linkscope.bench.train.runner import TrainPlan, run_points

# (layers, hidden, ranks, zero): the first group calibrates, the second is held back.
CALIBRATE = [(2, 128, 1, 0), (4, 128, 1, 0), (2, 256, 1, 0), (2, 128, 2, 0), (4, 256, 2, 0), (2, 256, 2, 3),
             (3, 192, 2, 0), (4, 128, 2, 3)]
HOLD_OUT = [(3, 128, 1, 0), (3, 256, 2, 0), (2, 192, 1, 0), (4, 192, 2, 0), (3, 192, 2, 3), (4, 256, 1, 0)]


def _plan(layers: int, hidden: int, ranks: int, zero: int, db: str) -> TrainPlan:
    m = scaled_model(load_model("llama2-7b"), layers=layers, hidden=hidden, heads=hidden // 32, vocab=1024,
                     seq_len=128)
    cfg = TrainConfig(model=m, micro_batch=2, iters=6, warmup=2, zero=zero, profile_steps=0,
                      run=RunOptions(backend="gloo", db_path=db, quiet=True)).validated()
    return TrainPlan(f"{layers}l-{hidden}h-{ranks}r-z{zero}", cfg, ranks)


ROUNDS = 3
"""Each point is measured this often, the rounds interleaved; the fastest round counts (fastest_by_label)."""


def measure(db: str) -> list[dict[str, object]]:
    """Every grid point measured ROUNDS times in one run; the stored points (settings and steps)."""
    plans = [_plan(*p, db) for _ in range(ROUNDS) for p in CALIBRATE + HOLD_OUT]
    plans, _, _ = prepare_plans(TrainRequest(plans[0].config), plans)
    result = run_points(same_threads(plans), emit=lambda line: None)
    if result.exit_code:
        raise SystemExit(f"measurement failed: {result.error}")
    return [{"label": p.label, "settings": p.settings, "steps": p.steps} for p in result.points]


def hold_out_errors(points: list[dict[str, object]]) -> list[float]:
    """Relative error of each held-back point's predicted step time (fit on the calibration points)."""
    best = fastest_by_label(points)
    calib = [p for p in best if p["label"] in {_label(c) for c in CALIBRATE}]
    held = [p for p in best if p["label"] in {_label(c) for c in HOLD_OUT}]
    fit = fit_train(*measured_points(calib))  # type: ignore[arg-type]
    shapes, times = measured_points(held)  # type: ignore[arg-type]
    return [(fit.predict_s(s) - t) / t for s, t in zip(shapes, times)]


def _label(c: tuple[int, int, int, int]) -> str:
    return f"{c[0]}l-{c[1]}h-{c[2]}r-z{c[3]}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        points = measure(str(Path(tmp) / "r.db"))
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        data = {"calibrate": [_label(c) for c in CALIBRATE], "hold_out": [_label(c) for c in HOLD_OUT],
                "points": points}
        args.write.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    errors = hold_out_errors(points)
    for p, e in zip([p for p in fastest_by_label(points) if p["label"] in {_label(c) for c in HOLD_OUT}], errors):
        print(f"{p['label']:16s} error {e:+.1%}")
    median = statistics.median(abs(e) for e in errors)
    print(f"held-back median |error| {median:.1%} (target <= 10%)")
    print("PASS" if median <= 0.10 else "FAIL")


if __name__ == "__main__":
    main()
