"""`advise train` ranks on time, never on MFU, and every MFU it prints names the peak it is of."""

from __future__ import annotations

import json

from linkscope.hardware.loader import load_db
from tests.advise.test_cli import run

FP8 = ["advise", "train", "--model", "llama3-70b", "--tokens", "100B", "--precision", "fp8", "--gpus", "64",
       "--objective", "time"]


def test_fp8_rows_are_ranked_by_time_with_mfu_of_the_fp8_peak() -> None:
    result = run(*FP8, "--json")
    assert result.exit_code == 0, result.stderr
    rows = [r for r in json.loads(result.stdout)["rows"] if r["feasible"]]
    assert rows
    times = [r["time_to_train_s"] for r in rows]
    assert times == sorted(times)
    db = load_db(include_user=False)
    for r in rows:
        assert r["mfu_precision"] == "fp8" and 0 < r["mfu"] < 1
        gpu = db.offerings[r["offering"]].system.node.gpu
        assert r["mfu_peak_tflops"] == gpu.fp8_dense_tflops


def test_the_winner_names_the_peak() -> None:
    text = run(*FP8).stdout
    winner = " ".join(text.split("Best:")[1].split())
    assert "TFLOP/s FP8 dense" in winner
