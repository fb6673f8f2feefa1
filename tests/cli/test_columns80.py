"""At 80 columns every table keeps ids, money and speeds whole: the least important columns are left out or
wrapped, nothing is cut (no `…`, no line wider than the terminal). One case per command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.cli.helpers import run_cli
from tests.conftest import FIXTURES

COMMANDS = {
    "advise-train": ["advise", "train", "-m", "llama2-7b", "--tokens", "1e9"],
    "advise-train-compare": ["advise", "train", "-m", "llama2-7b", "--tokens", "1e9", "--compare-interconnect"],
    "advise-infer": ["advise", "infer", "-m", "llama2-7b", "--latency-budget", "50"],
    "advise-infer-qps": ["advise", "infer", "-m", "llama2-7b", "--latency-budget", "50", "--qps", "10"],
    "advise-infer-compare": ["advise", "infer", "-m", "llama2-7b", "--latency-budget", "50",
                             "--compare-interconnect"],
    "catalog": ["catalog", "--gpu", "H100"],
    "predict-train": ["predict", "train", "-s", "aws/p5.48xlarge", "-m", "llama2-7b"],
    "predict-infer": ["predict", "infer", "-s", "aws/p5.48xlarge", "-m", "llama2-7b"],
}


def _whole(output: str) -> None:
    cut = [line for line in output.splitlines() if cell_len(line) > 80 or "…" in line]
    assert not cut, "\n".join(cut[:5])


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_model_commands_fit_80_columns_whole(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = run_cli(*COMMANDS[name])
    assert result.exit_code == 0, result.output
    _whole(result.stdout)
    if name.startswith("advise") and "compare" not in name:
        wide = run_cli(*COMMANDS[name], "--json")
        rows = json.loads(wide.stdout).get("rows", [])
        shown = [r["offering"] for r in rows[:5] if r.get("feasible")]
        assert all(offering in result.stdout for offering in shown)  # ids whole, on one line


def test_stored_run_commands_fit_80_columns_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "r.db")
    for name in ("v2.13_all_reduce_a100_8gpu_oci.txt", "v2.13_all_reduce_h100_2x8.txt"):
        assert run_cli("import", "nccl-tests", str(FIXTURES / "nccl_tests" / name), "--db", db).exit_code == 0
    first, second = [r["run_id"] for r in json.loads(run_cli("runs", "--json", "--db", db).stdout)]
    monkeypatch.setenv("COLUMNS", "80")
    for args in (["runs"], ["runs", "show", first], ["compare", first, second]):
        result = run_cli(*args, "--db", db)
        assert result.exit_code == 0, result.output
        # `runs show` prints nccl-tests' own table as nccl-tests does (plain lines to diff against it, wrapped by
        # the terminal, never cut); its rich tables above must fit.
        _whole(result.stdout.split("\n#", 1)[0])
        assert "…" not in result.stdout and first in result.stdout


def test_report_fleet_fits_80_columns_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from linkscope.check import fleet_rules
    from linkscope.results.records import RunInfo
    from linkscope.results.store import ResultStore

    db = tmp_path / "r.db"
    with ResultStore(db) as store:
        for figure in (10.0, 9.0, 8.0, 7.0, 6.0, 2.0):
            nodes = [{"node": n, "hostname": f"gpu-node-{n:03d}", "verdict": "PASS", "pair_gb_per_s": figure,
                      "items": [{"name": fleet_rules.PAIR_ITEM, "status": "PASS", "measured": figure},
                                {"name": "nccl.all_reduce.busbw", "status": "PASS", "measured": 123.456}]}
                     for n in range(3)]
            store.finish_run(store.create_run(RunInfo(kind="check", label="fleet", extra={"fleet": {"nodes": nodes}})),
                             "complete")
    monkeypatch.setenv("COLUMNS", "80")
    result = run_cli("report", "--fleet", "--db", str(db))
    assert result.exit_code == 0, result.output
    _whole(result.stdout)
    assert "older left out" in result.stdout and "123.456" in " ".join(result.stdout.split())
