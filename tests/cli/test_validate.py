"""`linkscope validate` on the command line: the JSON contract and the table."""

from __future__ import annotations

import json

from tests.cli.helpers import run_cli


def test_validate_json_has_kinds_and_sources() -> None:
    result = run_cli("validate", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert set(data["kinds"]) == {"training", "collectives", "inference", "moe", "disaggregated", "memory",
                                  "tuning"}
    # tuning is listed with no entries and says why (no allowed source; CPU sweeps the fit cannot price).
    tuning = data["kinds"].pop("tuning")
    assert tuning["n"] == 0 and "held out" in tuning["why"] and "compression term" in tuning["why"]
    for summary in data["kinds"].values():
        assert {"n", "in_sample_median_pct", "loso_median_pct", "loso_max_pct", "loro_median_pct",
                "coverage_pct"} <= set(summary)
        assert summary["n"] >= 1 and summary["loso_max_pct"] >= summary["loso_median_pct"]
        assert 0 <= summary["coverage_pct"] <= 100
    verdicts = data["kinds"]["disaggregated"]["verdicts"]
    assert verdicts["n"] >= 3 and verdicts["right"] == verdicts["n"]
    sources = {s["source"]: s for s in data["sources"]}
    assert sources["korthikanti-2022"]["kind"] == "training" and sources["korthikanti-2022"]["n"] == 8
    assert all({"kind", "n", "in_sample_median_pct", "loso_median_pct", "loso_max_pct"} <= set(s)
               for s in data["sources"])
    assert "entries" not in data
    regimes = {r["regime"]: r for r in data["regimes"]}
    assert {"fsdp-multi-node", "small-messages", "small-batch-decode"} <= set(regimes)
    for r in regimes.values():
        assert r["kind"] in data["kinds"] and r["n"] >= 1 and r["loro_max_pct"] >= r["loro_median_pct"]


def test_validate_table_and_entries() -> None:
    result = run_cli("validate", "--entries")
    assert result.exit_code == 0
    assert "LOSO median" in result.stdout and "Per entry" in result.stdout
    assert "Per regime" in result.stdout and "small-batch-decode" in result.stdout
    assert "tuning: a knob's speedup" in result.stdout
