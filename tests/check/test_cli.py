"""`linkscope check` end to end on this machine's CPU ranks, and its refusals of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli


@pytest.mark.parametrize("args", [
    ("--expect", "no-such-offering"),
    ("--warn-pct", "95"),
    ("--pass-pct", "120"),
    ("--warn-pct", "-1"),
    ("--junit", "/nonexistent-dir/x.xml"),
    ("--prometheus", "/nonexistent-dir/x.prom"),
    ("--quick", "--full"),
])
def test_bad_input_exits_2(args: tuple[str, ...], tmp_path: Path) -> None:
    result = run_cli("check", "--db", str(tmp_path / "r.db"), *args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_quick_check_runs_for_real_and_is_stored(tmp_path: Path) -> None:
    db, junit, prom = tmp_path / "r.db", tmp_path / "check.xml", tmp_path / "check.prom"
    result = run_cli("check", "--quick", "--json", "--junit", str(junit), "--prometheus", str(prom), "--db", str(db))
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"verdict", "run_id", "expected_system", "items"}
    assert doc["verdict"] in ("PASS", "WARN", "FAIL")
    assert (result.exit_code == 1) == (doc["verdict"] == "FAIL")
    names = {i["name"] for i in doc["items"]}
    assert {"gpus.count", "topology.kind", "collective.correctness", "transport"} <= names
    for item in doc["items"]:
        assert set(item) == {"name", "status", "measured", "expected", "unit", "source", "fix", "limits"}
        if item["status"] in ("WARN", "FAIL", "SKIP"):
            assert item["fix"]
    assert "<testsuite" in junit.read_text()
    assert 'linkscope_check_status{item="gpus.count"' in prom.read_text()
    assert 'nccl_bus_bandwidth_gbs{collective="AllReduce"' in prom.read_text()
    with ResultStore(db) as store:
        info = store.get_run(doc["run_id"])
        assert info.kind == "check" and info.extra["check"]["verdict"] == doc["verdict"]
        assert store.rows(doc["run_id"])


def test_check_against_an_offering_this_machine_is_not_fails_with_exit_1(tmp_path: Path) -> None:
    junit = tmp_path / "check.xml"
    result = run_cli("check", "--expect", "dgx-h100", "--junit", str(junit), "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 1
    assert "FAIL gpus.count" in result.stdout and "verdict: FAIL" in result.stdout
    assert "<failure" in junit.read_text()
    # gloo on CPU ranks is never judged against the H100 model: the collective lines say why they are not.
    assert "SKIP all_reduce.busbw@" in result.stdout and "not comparable with dgx-h100" in result.stdout
