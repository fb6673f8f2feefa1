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


def test_a_log_whose_header_names_no_op_compares_with_numbers(tmp_path: Path) -> None:
    # The MPI launcher's "[1,0]<stdout>:" prefixes hid the binary's name; the columns still say all-reduce
    # (a reduction to no root whose busbw is 2(n-1)/n of its algbw).
    db = tmp_path / "r.db"
    base = _import(db, "v2.13_all_reduce_a100_8gpu_oci.txt")
    prefixed = _import(db, "v2.13_all_reduce_h100_8gpu_p5_mpi_prefixed.txt")
    data = json.loads(run_cli("compare", base, prefixed, "--json", "--db", str(db)).stdout)
    assert data["op"] == "all_reduce"
    p5 = data["runs"][1]
    assert p5["busbw"][str(1 << 30)] == 441.81
    assert (p5["peak_busbw"], p5["peak_placement"]) == (483.35, "in_place")  # the best of both placements
    assert all(v is not None for v in p5["busbw"].values())
    table = run_cli("compare", base, prefixed, "--db", str(db)).stdout
    assert "441.8" in table


def test_compare_runs_is_pure() -> None:
    from linkscope.results.records import CollectiveRow, RunInfo

    def row(busbw: float) -> CollectiveRow:
        return CollectiveRow("all_reduce", 1 << 20, 1 << 18, "float", "sum", 0, "out_of_place", 10.0, busbw, busbw, 0)

    runs = [(RunInfo(kind="bench", run_id="a", nccl_env={"NCCL_ALGO": "Ring"}), [row(10.0)]),
            (RunInfo(kind="bench", run_id="b"), [row(12.0)])]
    data = compare_runs(runs)
    assert data["runs"][1]["busbw_pct"][str(1 << 20)] == 20.0
    assert data["environment_diff"]["env.NCCL_ALGO"] == ["Ring", None]
