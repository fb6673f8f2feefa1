"""`advise train --peft lora`: a fine-tune ranked over the catalog."""

from __future__ import annotations

import json

from tests.cli.helpers import run_cli


def _advise(*extra: str) -> dict:
    result = run_cli("advise", "train", "-m", "llama2-70b", "--peft", "lora", "--tokens", "200M", "--gpus", "8",
                     "--global-batch", "64", "--objective", "cost", "--top", "200", "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_fine_tune_fits_on_single_nodes_that_full_training_cannot_use() -> None:
    doc = _advise()
    assert doc["request"]["peft"]["rank"] == 16
    feasible = [r for r in doc["rows"] if r["feasible"]]
    assert feasible and all(r["gpus"] == 8 for r in feasible)
    full = run_cli("advise", "train", "-m", "llama2-70b", "--tokens", "200M", "--gpus", "8", "--global-batch", "64",
                   "--objective", "cost", "--top", "200", "--json")
    full_feasible = [r for r in json.loads(full.stdout)["rows"] if r["feasible"]]
    assert len(feasible) > len(full_feasible)


def test_an_fp8_base_rules_out_gpus_without_fp8() -> None:
    doc = _advise("--base-precision", "fp8", "--all")
    a100 = [r for r in doc["rows"] if r["gpu"].startswith("A100")]
    assert a100 and all(not r["feasible"] and "FP8" in r["reason"] for r in a100)
