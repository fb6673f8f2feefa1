"""Accuracy of `predict train` on the calibration set (Korthikanti et al. 2022, dgx-a100).

Prints each case's predicted and measured iteration time, the error, and the median and maximum absolute
error against the targets (median <= 5%, max <= 10%; Calculon reports 3.65% mean, 8.87% max).

    python benchmarks/accuracy_calibration.py
"""

from __future__ import annotations

import statistics

from linkscope.hardware.loader import load_db
from linkscope.model.calibration.calibration_set import CASES, SEQ_LEN, SYSTEM
from linkscope.model.step.job import Job
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import model_presets


def predict_case(case, system) -> float:  # type: ignore[no-untyped-def]
    """Predicted step time of one calibration case, with the attention kernels of that era (unfused)."""
    job = Job(model=model_presets()[case.model], global_batch=case.global_batch, seq_len=SEQ_LEN,
              attention="unfused", dp_overlap=False)
    return float(estimate_steps(job, system.with_gpus(case.gpus), case.layout()).step_time_s[0])


def main() -> None:
    system = load_db(include_user=False).systems[SYSTEM]
    errors = []
    print(f"{'model':14s} {'recompute':9s} {'measured s':>10s} {'predicted s':>11s} {'error':>7s}")
    for case in CASES:
        predicted = predict_case(case, system)
        error = (predicted - case.step_time_s) / case.step_time_s
        errors.append(abs(error))
        print(f"{case.model:14s} {case.recompute:9s} {case.step_time_s:10.2f} {predicted:11.2f} {error:+7.1%}")
    median, worst = statistics.median(errors), max(errors)
    print(f"median |error| {median:.2%} (target <= 5%), max |error| {worst:.2%} (target <= 10%)")
    print("PASS" if median <= 0.05 and worst <= 0.10 else "FAIL")


if __name__ == "__main__":
    main()
