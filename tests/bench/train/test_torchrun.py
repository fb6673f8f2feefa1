"""`bench train` under torchrun: a `--sweep` runs its points one after another over the same ranks; a `--scaling`
runs each rank count on the first ranks of the job while the others wait."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from linkscope.bench.faults import ENV_VAR
from linkscope.bench.train.config import TrainConfig
from linkscope.bench.train.loop import point_advances, points_where
from linkscope.cli.main import app
from linkscope.model.step.scaled import scaled_model
from linkscope.model.step.transformer import load_model
from linkscope.results.store import ResultStore

TORCHRUN = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
SMALL = ["--model", "llama2-7b", "--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "128",
         "--seq-len", "32"]



def _torchrun_json(db: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`bench train --json` on 2 torchrun ranks of the small model; the process and rank 0's document."""
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "--max-restarts", "0", "-m", "linkscope",
           "bench", "train", *SMALL, "-n", "2", "-w", "1", "--profile-steps", "1", *extra,
           "--db", str(db), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=840, env={**os.environ})
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(done.stdout[done.stdout.index("{"):])  # rank 0 alone prints, one document

@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this python")
@pytest.mark.timeout(900)
def test_a_sweep_under_torchrun_measures_every_point_on_the_same_ranks(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    done, out = _torchrun_json(db, "--sweep", "bucket-mb=1,25")
    assert [p["label"] for p in out["points"]] == ["bucket-mb=1", "bucket-mb=25"]
    assert [p["parallelism"]["bucket_mb"] for p in out["points"]] == [1.0, 25.0]
    assert all(p["ranks"] == 2 and p["steps"]["steps"] == 2 for p in out["points"])
    assert all(len(p["trace"]["paths"]) == 2 for p in out["points"])
    assert out["sweep"]["baseline"] == "bucket-mb=1"
    with ResultStore(db) as store:
        run = store.get_run(out["run_id"])
    assert run.status == "complete" and len(run.extra["train"]["points"]) == 2
    assert "USDT:" not in done.stderr


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this python")
@pytest.mark.timeout(900)
def test_scaling_under_torchrun_runs_each_count_on_the_first_ranks(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _, out = _torchrun_json(db, "--scaling", "1,2")
    assert [p["label"] for p in out["points"]] == ["ranks=1", "ranks=2"]
    assert [p["ranks"] for p in out["points"]] == [1, 2]
    assert all(p["steps"]["steps"] == 2 for p in out["points"])
    assert [len(p["trace"]["paths"]) for p in out["points"]] == [1, 2]  # rank 1 sat the first point out
    assert [row["ranks"] for row in out["scaling"]] == [1, 2]
    with ResultStore(db) as store:
        run = store.get_run(out["run_id"])
    assert run.status == "complete" and [p["ranks"] for p in run.extra["train"]["points"]] == [1, 2]


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this python")
@pytest.mark.timeout(900)
def test_a_rank_that_hangs_in_a_later_scaling_point_is_named_and_the_earlier_point_kept(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    # Rank 1 sits the first point out, then hangs (bounded, so torchrun's agent ends) in the second.
    fault = json.dumps({"action": "hang", "rank": 1, "op": "train", "seconds": 20})
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "--max-restarts", "0", "-m", "linkscope",
           "bench", "train", *SMALL, "-n", "2", "-w", "1", "--profile-steps", "1", "--scaling", "1,2",
           "--timeout", "4", "--quiet", "--db", str(db)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=840, env={**os.environ, ENV_VAR: fault})
    assert done.returncode != 0
    assert "exitcode  : 3" in done.stderr  # rank 0's own exit code, as torchrun reports it
    with ResultStore(db) as store:
        (summary,) = store.list_runs()
        run = store.get_run(summary.run_id)
    assert run.status == "incomplete"
    assert run.error == ("rank 1 stopped making progress for 4 s in warm-up step 1 (ranks=2); "
                         "the other ranks waited for it")
    points = run.extra["train"]["points"]
    assert [(p["label"], p["status"]) for p in points] == [("ranks=1", "complete"), ("ranks=2", "incomplete")]
    assert len(points[0]["steps"]) == 3


@pytest.mark.parametrize("counts", ["1,4", "1,3"])
def test_scaling_counts_that_do_not_fit_torchrun_are_one_line_and_exit_2(
        counts: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")):
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["bench", "train", *SMALL, "--scaling", counts, "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 2
    assert "do not fit the 2 ranks torchrun started" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_progress_reads_as_the_point_and_step_across_a_sweep() -> None:
    m = scaled_model(load_model("llama2-7b"), layers=1, hidden=64, heads=2)
    cfg = TrainConfig(model=m, warmup=1, iters=2, profile_steps=1, trace_dir="/t")
    assert point_advances(cfg) == 2 * 3 + 1
    where = points_where([("bucket-mb=1", cfg), ("bucket-mb=25", cfg)])
    assert where(0) == "while starting"
    assert where(1) == "in warm-up step 1 (bucket-mb=1)"
    assert where(7) == "while tracing (bucket-mb=1)"
    assert where(8) == "in warm-up step 1 (bucket-mb=25)"
    assert where(12) == "in step 2 of 2 (bucket-mb=25)"
