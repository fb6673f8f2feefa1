"""`linkscope compare` on bench train runs: each knob's measured step time beside its stored prediction, and the
measured speedup over the no-compression point against the predicted one. The runs are the real ones a 2-gloo-rank
sweep (none, fp16, powersgd:2) and a `--comm-hook fp16` run stored (tests/fixtures/train/knob_runs_gloo.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from linkscope.hardware.errors import UserError
from linkscope.report.compare_knobs import compare_knobs, knob_label
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "train" / "knob_runs_gloo.json"


def _stored(db: Path) -> list[str]:
    """The recorded runs, stored again in a fresh database as bench train stores them; their new ids."""
    ids = []
    with ResultStore(db) as store:
        for run in json.loads(RUNS.read_text())["runs"]:
            info = RunInfo(kind="train", backend=run["backend"], world_size=run["world_size"],
                           command=run["command"])
            run_id = store.create_run(info)
            store.update_run(run_id, extra=run["extra"])
            store.finish_run(run_id, "complete")
            ids.append(run_id)
    return ids


def test_a_sweep_shows_each_knob_measured_beside_predicted(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    sweep, _ = _stored(db)
    result = run_cli("compare", sweep, "--json", "--db", str(db))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [r["knob"] for r in data["rows"]] == ["none, 100 MB", "fp16, 100 MB", "powersgd:2, 100 MB"]
    base, fp16, powersgd = data["rows"]
    assert base["baseline"] and data["baseline"]["label"] == "grad-compression=none"
    assert base["measured_speedup"] == base["predicted_speedup"] == 1.0
    for row in (fp16, powersgd):
        assert row["run_id"] == sweep and row["prediction_source"] == "system dgx-1-v100-40gbe"
        assert row["measured_over_predicted"] == pytest.approx(row["measured_step_time_s"] /
                                                               row["predicted_step_time_s"])
        assert row["measured_speedup"] == pytest.approx(base["measured_step_time_s"] / row["measured_step_time_s"])
        assert row["predicted_speedup"] == pytest.approx(base["predicted_step_time_s"] /
                                                         row["predicted_step_time_s"])
        assert row["speedup_ratio"] == pytest.approx(row["measured_speedup"] / row["predicted_speedup"])
    # PowerSGD's encode/decode is priced: predicted slower than the baseline, as measured (the sign is right).
    assert powersgd["predicted_speedup"] < 1 and powersgd["measured_speedup"] < 1 and powersgd["sign_right"]
    assert data["summary"]["knobs_predicted"] == 2 and data["summary"]["sign_cases"] == 2
    text = run_cli("compare", sweep, "--db", str(db))
    assert text.exit_code == 0 and "powersgd:2" in text.stdout and "median |ratio - 1|" in text.stdout
    assert max(len(line) for line in text.stdout.splitlines()) <= 80


def test_a_hook_run_compares_against_another_runs_baseline(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    sweep, hooked = _stored(db)
    data = json.loads(run_cli("compare", hooked, sweep, "--json", "--db", str(db)).stdout)
    # The baseline is the no-compression point even when the hooked run is named first.
    assert data["baseline"]["run_id"] == sweep and data["rows"][0]["run_id"] == hooked
    assert data["rows"][0]["knob"] == "fp16, 100 MB" and not data["rows"][0]["baseline"]
    text = run_cli("compare", hooked, sweep, "--db", str(db)).stdout
    assert hooked in text and sweep in text


def test_runs_of_another_job_or_kind_are_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    sweep, hooked = _stored(db)
    runs = json.loads(RUNS.read_text())["runs"]
    other = runs[1]["extra"]["train_summary"]["points"][0]
    with ResultStore(db) as store:
        info = RunInfo(kind="train")
        bigger = store.create_run(info)
        store.update_run(bigger, extra={"train_summary": {"points": [{**other, "ranks": 4}]}})
        empty = store.create_run(RunInfo(kind="train"))
    for args, says in (((sweep, bigger), "has ranks 4"), ((empty, sweep), "no measured training steps"),
                       ((hooked,), "measured one configuration")):
        result = run_cli("compare", *args, "--db", str(db))
        assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output


def test_a_point_without_a_prediction_keeps_its_measurement() -> None:
    runs = json.loads(RUNS.read_text())["runs"]
    points: list[dict[str, Any]] = [{**p, "predicted": None} for p in runs[0]["extra"]["train_summary"]["points"]]
    data = compare_knobs([RunInfo(kind="train", run_id="r1", extra={"train_summary": {"points": points}})])
    assert all(r["predicted_speedup"] is None and r["measured_speedup"] for r in data["rows"])
    assert data["summary"]["knobs_predicted"] == 0
    with pytest.raises(UserError, match="not a training run"):
        compare_knobs([RunInfo(kind="bench", run_id="b1")])
    assert knob_label({"grad_compression": "powersgd", "powersgd_rank": 4, "bucket_mb": 25.0,
                       "overlap": False}) == "powersgd:4, 25 MB, no-overlap"
