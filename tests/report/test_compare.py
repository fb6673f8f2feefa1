"""`linkscope compare` on imported nccl-tests logs: busbw at sizes, % vs the first run, environment diff."""

from __future__ import annotations

import json
from pathlib import Path

from linkscope.report.compare import compare_runs
from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli

NCCL = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"


def _import(db: Path, name: str) -> str:
    result = run_cli("import", "nccl-tests", str(NCCL / name), "--db", str(db))
    assert result.exit_code == 0, result.output
    with ResultStore(db) as store:
        return store.list_runs(limit=1)[0].run_id


def test_compare_two_imported_runs(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    a = _import(db, "v2.13_all_reduce_h100_2x8.txt")
    b = _import(db, "pre2.13_all_reduce_a10g_2nodes.txt")
    result = run_cli("compare", a, b, "--op", "all_reduce", "--json", "--db", str(db))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    first, second = data["runs"]
    assert first["busbw_pct"][str(64 << 20)] == 0.0
    assert second["busbw_pct"][str(64 << 20)] < -90  # an A10G over TCP against 2x8 H100
    assert second["peak_busbw"] < first["peak_busbw"]
    assert "hosts" in data["environment_diff"] and "world_size" in data["environment_diff"]
    table = run_cli("compare", a, b, "--db", str(db))
    assert table.exit_code == 0 and "what differs" in table.stdout
    assert run_cli("compare", a, "--db", str(db)).exit_code == 2
    assert run_cli("compare", a, "nope", "--db", str(db)).exit_code == 2


def test_compare_runs_is_pure() -> None:
    from linkscope.results.records import CollectiveRow, RunInfo

    def row(busbw: float) -> CollectiveRow:
        return CollectiveRow("all_reduce", 1 << 20, 1 << 18, "float", "sum", 0, "out_of_place", 10.0, busbw, busbw, 0)

    runs = [(RunInfo(kind="bench", run_id="a", nccl_env={"NCCL_ALGO": "Ring"}), [row(10.0)]),
            (RunInfo(kind="bench", run_id="b"), [row(12.0)])]
    data = compare_runs(runs)
    assert data["runs"][1]["busbw_pct"][str(1 << 20)] == 20.0
    assert data["environment_diff"]["env.NCCL_ALGO"] == ["Ring", None]
