"""`linkscope bench` and `linkscope p2p` from the command line: output, exports, errors, and no torch at startup."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from linkscope.cli.bench_cmd import register
from linkscope.results.store import ResultStore


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _invoke(*args: str):  # noqa: ANN202 - typer's Result
    return CliRunner().invoke(_app(), list(args), catch_exceptions=False)


def test_help_and_command_list_do_not_import_torch() -> None:
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom linkscope.cli.main import app\n"
            "r = CliRunner().invoke(app, ['bench', '--help'])\nassert r.exit_code == 0, r.output\n"
            "assert 'torch' not in sys.modules, 'torch imported'\nprint(r.output)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Exit codes: 0 ok; 1 wrong results" in out
    assert "-b 8 -e 64M -f 2 -n 20 -w 5" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "-b", "0"], "-b/--min-bytes must be at least 1 byte"),
        (["bench", "-b", "1M", "-e", "1K"], "larger than max"),
        (["bench", "allsum"], "unknown collective 'allsum'"),
        (["bench", "-d", "float8"], "unknown data type"),
        (["bench", "sendrecv", "--nproc", "1"], "sendrecv needs at least 2 ranks"),
        (["bench", "-d", "int8", "-o", "avg"], "gloo cannot average int8"),
        (["bench", "-G", "2", "--backend", "gloo"], "needs the nccl backend"),
        (["p2p", "--nproc", "1"], "p2p needs at least 2 ranks"),
        (["bench", "-b", "8", "-e", "99999999999999999999"], "larger than the 1 TiB limit"),
        (["bench", "--json-file", "/no/dir/x.json"], "--json-file /no/dir/x.json: directory /no/dir does not exist"),
        (["bench", "--csv", "/no/dir/x.csv"], "--csv /no/dir/x.csv: directory /no/dir does not exist"),
        (["bench", "-J", "/"], "is a directory"),
        (["bench", "--db", "/no/dir/x.db"], "directory /no/dir does not exist"),
        (["p2p", "--json-file", "/no/dir/x.json"], "--json-file /no/dir/x.json: directory /no/dir does not exist"),
        (["p2p", "--size", "2T"], "larger than the 1 TiB limit"),
    ],
)
def test_user_errors_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = _invoke(*args)
    assert result.exit_code == 2
    assert message in result.output.replace("\n", " ")
    assert "Traceback" not in result.output


def test_all_ops_table_json_and_csv(tmp_path: Path) -> None:
    db, js, cs = tmp_path / "r.db", tmp_path / "r.json", tmp_path / "r.csv"
    result = _invoke("bench", "all", "-b", "256", "-e", "1K", "-n", "2", "-w", "1", "--db", str(db),
                     "-J", str(js), "--csv", str(cs), "--label", "cli")
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("# nccl-tests-compatible output from linkscope")
    assert "# nThread 1 nGpus 1 minBytes 256 maxBytes 1024 step: 2(factor)" in out
    assert out.count("#  Rank ") == 2
    for perf in ("all_reduce_perf", "alltoall_perf", "sendrecv_perf", "scatter_perf"):
        assert f"# Collective test starting: {perf}" in out
    assert "# Out of bounds values : 0 OK" in out
    run_id = out.strip().splitlines()[-1].split()[4]
    store = ResultStore(db)
    run = store.get_run(run_id)
    assert run.status == "complete" and run.label == "cli" and run.world_size == 2
    assert len(store.rows(run_id)) == 9 * 3 * 2
    data = json.loads(js.read_text())
    first = data["results"][0]
    assert set(first) >= {"size", "count", "type", "redop", "root", "out_of_place", "in_place"}
    assert set(first["out_of_place"]) == {"time", "alg_bw", "bus_bw", "nwrong"}
    assert data["linkscope"]["run_id"] == run_id
    assert data["linkscope"]["groups"]["ranks"][1]["pid"] > 0
    assert [d["rank"] for d in data["config"]["devices"]] == [0, 1]
    rows = list(csv.DictReader(cs.open()))
    assert len(rows) == 54 and rows[0]["op"] == "all_reduce"


def test_p2p_prints_three_matrices(tmp_path: Path) -> None:
    result = _invoke("p2p", "--size", "16K", "-n", "2", "-w", "1", "--latency-iters", "3",
                     "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 0, result.output
    for title in ("Unidirectional bandwidth (GB/s)", "Bidirectional bandwidth (GB/s)", "Latency (us)"):
        assert title in result.output
    assert "(status complete)" in result.output


def test_old_spellings_still_work_for_one_release_with_a_warning(tmp_path: Path) -> None:
    js = tmp_path / "old.json"
    result = _invoke("bench", "all_reduce", "-b", "1K", "-e", "1K", "-n", "1", "-w", "1",
                     "--db", str(tmp_path / "r.db"), "--op", "max", "--json", str(js), "--quiet")
    assert result.exit_code == 0, result.output
    out = result.output.replace("\n", " ")
    assert "--op is deprecated and will be removed in linkscope 0.2; use -o/--redop" in out
    assert "--json FILE is deprecated and will be removed in linkscope 0.2; use -J/--json-file FILE" in out
    assert json.loads(js.read_text())["results"][0]["redop"] == "max"
