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
                "coverage_pct", "half_width_pct"} <= set(summary)
        assert summary["n"] >= 1 and summary["loso_max_pct"] >= summary["loso_median_pct"]
        assert 0 <= summary["coverage_pct"] <= 100 and summary["half_width_pct"] > 0
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
        assert 0 <= r["coverage_pct"] <= 100 and r["half_width_pct"] > 0
    worst = data["worst_regimes"]
    assert set(worst) == {r["kind"] for r in regimes.values()} >= {"training", "collectives", "inference"}
    for kind, w in worst.items():
        # Three of each, or every regime of a kind that has fewer (memory has two).
        n = min(3, sum(1 for r in regimes.values() if r["kind"] == kind))
        assert len(w["largest_error"]) == len(w["least_coverage"]) == n
        assert all(regimes[r["regime"]]["kind"] == kind for r in w["largest_error"] + w["least_coverage"])


def test_validate_table_and_entries() -> None:
    result = run_cli("validate", "--entries")
    assert result.exit_code == 0
    assert "LOSO" in result.stdout and "median" in result.stdout and "Per entry" in result.stdout
    assert "Per regime" in result.stdout and "small-batch-decode" in result.stdout
    assert "tuning: a knob's speedup" in result.stdout


def test_validate_ends_with_the_worst_regimes_and_shows_coverage() -> None:
    text = run_cli("validate").stdout
    assert "coverage" in text and "half-width" in text
    tail = text[text.index("Worst regimes"):]
    assert "training: largest LORO error:" in tail and "least coverage:" in tail


def test_validate_filters_by_kind_and_source() -> None:
    data = json.loads(run_cli("validate", "--kind", "moe", "--json", "--entries").stdout)
    assert set(data["kinds"]) == {"moe"} and {e["kind"] for e in data["entries"]} == {"moe"}
    one = json.loads(run_cli("validate", "--source", "korthikanti-2022", "--json").stdout)
    assert [s["source"] for s in one["sources"]] == ["korthikanti-2022"] and one["kinds"]["training"]["n"] == 8


def test_validate_with_a_filter_selecting_nothing_says_so_and_exits_0() -> None:
    result = run_cli("validate", "--source", "no-such-source")
    assert result.exit_code == 0 and "no evidence entry matches --source no-such-source" in result.stdout
    data = json.loads(run_cli("validate", "--kind", "moe", "--source", "korthikanti-2022", "--json").stdout)
    assert data["kinds"] == {} and "no evidence entry matches" in data["note"]


def test_validate_with_an_unknown_kind_is_one_line_and_exit_2() -> None:
    result = run_cli("validate", "--kind", "nope")
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "unknown kind 'nope'" in result.stderr


def test_a_kind_without_entries_is_listed_only_where_the_filter_asks_for_it() -> None:
    data = json.loads(run_cli("validate", "--kind", "tuning", "--json").stdout)
    assert data["kinds"]["tuning"]["n"] == 0 and "no entries yet" in data["kinds"]["tuning"]["why"]
    assert "no evidence entry matches --kind tuning" in data["note"]
    assert "tuning" not in json.loads(run_cli("validate", "--kind", "moe", "--json").stdout)["kinds"]
