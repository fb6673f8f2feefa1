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


CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "nccl_tests"


def test_gpu_model_and_count_are_in_the_environment_diff_and_peak_says_its_placement(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    h100 = _import(db, "v2.13_all_reduce_h100_2x8.txt")
    result = run_cli("import", "nccl-tests", str(CORPUS / "rccl_tests_mi300x_8gpu_aac8.txt"), "--db", str(db))
    assert result.exit_code == 0, result.output
    with ResultStore(db) as store:
        mi300x = store.list_runs(limit=1)[0].run_id
    data = json.loads(run_cli("compare", h100, mi300x, "--json", "--db", str(db)).stdout)
    assert data["environment_diff"]["gpu"] == ["NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"]
    assert "gpus_per_node" not in data["environment_diff"]  # 8 per host on both
    assert data["environment_diff"]["world_size"] == ["16", "8"]
    first, second = data["runs"]
    assert (second["peak_busbw"], second["peak_placement"]) == (315.91, "in_place")  # 8 GiB in-place, not 315.69
    assert data["latency_bytes"] == 8 and first["latency_bytes"] == second["latency_bytes"] == 8
    table = run_cli("compare", h100, mi300x, "--db", str(db)).stdout
    assert "lat us@8" in table and " ip" in table


def test_latency_is_not_compared_without_a_common_size(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    one_size = _import(db, "derived_h100_8gpu_16g_440.txt")  # a single 16 GiB row
    sweep = _import(db, "v2.13_all_reduce_h100_2x8.txt")  # 8 B .. 8 GiB
    data = json.loads(run_cli("compare", sweep, one_size, "--json", "--db", str(db)).stdout)
    assert data["latency_bytes"] is None and all(e["latency_us"] is None for e in data["runs"])
    assert "no size all runs measured" in run_cli("compare", sweep, one_size, "--db", str(db)).stdout
