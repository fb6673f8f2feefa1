"""The store on a real PostgreSQL server (started by the session's `pg_server` fixture): the same schema and
migrations as SQLite, 16 concurrent writers with no lost row, bad URLs and passwords, a server killed mid-run."""

from __future__ import annotations

import math
import multiprocessing
import os
import subprocess
import sys

import psycopg
import pytest

from linkscope.hardware.errors import FaultError, UserError
from linkscope.results import schema
from linkscope.results.database import DbLocation, redact
from linkscope.results.records import CollectiveRow, PairRow, RunInfo
from linkscope.results.store import ResultStore, require_existing


def row(size: int, **kw) -> CollectiveRow:
    values = dict(op="all_reduce", size_bytes=size, count=size // 4, dtype="float", redop="sum", root=-1,
                  placement="out_of_place", time_us=10.0 + size / 1e3, algbw=1.5, busbw=2.625, nwrong=0, world_size=8)
    return CollectiveRow(**{**values, **kw})


def test_runs_rows_and_pairs_round_trip(pg_url: str) -> None:
    with ResultStore(pg_url) as store:
        info = RunInfo(kind="bench", label="pg", hosts=["a", "b"], world_size=16, nodes=2, backend="nccl",
                       versions={"nccl": "2.21.5"}, system={"id": "dgx-h100"}, extra={"k": [1, 2]})
        run_id = store.create_run(info)
        big = row(1 << 40, time_us=123456.789012345, nccl_algo="RING", nccl_proto="LL128", nccl_channels=16)
        store.add_rows(run_id, [row(8, times_us=[1.5, 2.5], iter_stats={"p99_us": 3.0}), big])
        store.add_pair_rows(run_id, [PairRow(0, 1, 1 << 20, 12.5, 24.0, 3.25)])
        store.finish_run(run_id, "complete")
        back = store.get_run(run_id[:5])
        assert (back.status, back.hosts, back.system, back.extra) == ("complete", ["a", "b"], {"id": "dgx-h100"},
                                                                      {"k": [1, 2]})
        rows = store.rows(run_id)
        assert rows[0].times_us == [1.5, 2.5] and rows[0].iter_stats == {"p99_us": 3.0}
        # 64-bit sizes and double-precision times survive (PostgreSQL's INTEGER and REAL would not).
        assert rows[1] == big
        assert store.pair_rows(run_id) == [PairRow(0, 1, 1 << 20, 12.5, 24.0, 3.25)]
        (summary,) = store.list_runs()
        assert (summary.n_rows, summary.ops) == (3, ["all_reduce", "p2p"])
        with pytest.raises(ValueError, match="time_us is nan"):
            store.add_rows(run_id, [row(16, time_us=math.nan)])
        assert len(store.rows(run_id)) == 2
        assert store.delete_run(run_id) == run_id and store.list_runs() == []


def test_the_schema_and_its_version_are_those_of_sqlite(pg_url: str) -> None:
    ResultStore(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        columns = {r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns "
                                              "WHERE table_name = 'collective_rows'")}
    assert version == str(schema.latest_version())
    assert {"nccl_algo", "nccl_proto", "nccl_channels", "iter_stats"} <= columns
    ResultStore(pg_url).close()  # at the newest already: nothing runs twice


def test_a_newer_schema_is_refused_naming_the_url_without_its_password(pg_url: str, pg_server) -> None:  # noqa: ANN001
    ResultStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(UserError, match=r"schema version 99.*upgrade linkscope") as caught:
        ResultStore(pg_url)
    assert pg_server.password not in str(caught.value) and "***@127.0.0.1" in str(caught.value)


def test_tables_of_our_names_that_we_did_not_make_are_left_alone(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER)")
    with pytest.raises(UserError, match="not a linkscope results database.*runs"):
        ResultStore(pg_url)


@pytest.mark.parametrize("wrong", ["password", "port", "database"])
def test_a_wrong_password_port_or_database_is_one_line_without_the_password(pg_server, wrong: str) -> None:  # noqa: ANN001
    url = {"password": pg_server.url_for("postgres", password="not-the-password"),
           "port": pg_server.url_for("postgres").replace(f":{pg_server.port}/", ":1/"),
           "database": pg_server.url_for("no_such_db")}[wrong]
    with pytest.raises(UserError, match="cannot connect to the results database") as caught:
        ResultStore(url)
    message = str(caught.value)
    assert "\n" not in message and "not-the-password" not in message and pg_server.password not in message
    assert message.startswith(redact(url))


def test_read_only_commands_need_linkscope_tables_there(pg_url: str) -> None:
    with pytest.raises(UserError, match="no linkscope results there"):
        require_existing(pg_url)
    ResultStore(pg_url).close()
    assert require_existing(pg_url) == DbLocation(url=pg_url)


def test_redact_drops_passwords_in_the_netloc_and_the_query() -> None:
    assert redact("postgresql://me:s3cret@db:5432/runs") == "postgresql://me:***@db:5432/runs"
    assert redact("postgres://db/runs?password=s3cret&sslmode=require") == \
        "postgres://db/runs?password=***&sslmode=require"
    assert redact("postgresql://me@db/runs") == "postgresql://me@db/runs"


WRITERS, SIZES = 16, 50


def _writer(url: str, index: int, start) -> None:  # noqa: ANN001 - a multiprocessing barrier
    start.wait()  # every writer opens the new database at once: schema creation races too
    with ResultStore(url) as store:
        run_id = store.create_run(RunInfo(kind="bench", label=f"writer-{index}"))
        for size in range(SIZES):
            store.add_rows(run_id, [row(size)])
        store.finish_run(run_id, "complete")


def test_sixteen_concurrent_writers_lose_no_row(pg_url: str) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(pg_url, i, start)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    with ResultStore(pg_url) as store:
        runs = store.list_runs()
        assert sorted(r.label for r in runs) == sorted(f"writer-{i}" for i in range(WRITERS))
        for run in runs:
            assert run.status == "complete"
            assert [r.size_bytes for r in store.rows(run.run_id)] == list(range(SIZES))


_HALF_RUN = """
import sys
from linkscope.results.records import CollectiveRow, RunInfo
from linkscope.results.store import ResultStore
store = ResultStore(sys.argv[1])
run_id = store.create_run(RunInfo(kind="bench", label="killed"))
row = dict(op="all_reduce", count=1, dtype="float", redop="sum", root=-1, placement="out_of_place",
           time_us=1.0, algbw=1.0, busbw=1.0, nwrong=0)
store.add_rows(run_id, [CollectiveRow(size_bytes=s, **row) for s in (8, 16)])
print(run_id, flush=True)
sys.stdin.readline()  # the test kills the server now
store.add_rows(run_id, [CollectiveRow(size_bytes=32, **row)])
"""


def test_a_server_killed_mid_run_loses_nothing_committed(pg_server, pg_url: str) -> None:  # noqa: ANN001
    ResultStore(pg_url).close()
    writer = subprocess.Popen([sys.executable, "-c", _HALF_RUN, pg_url], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert writer.stdout is not None and writer.stdin is not None
    run_id = writer.stdout.readline().strip()
    pg_server.kill()
    try:
        _, err = writer.communicate("go\n", timeout=120)
    finally:
        pg_server.start_again()
    assert writer.returncode != 0
    fault = err.strip().splitlines()[-1]
    assert "FaultError" in fault and "lost the connection to the results database" in fault
    assert pg_server.password not in err
    with ResultStore(pg_url) as store:  # the writer is gone: its run is marked incomplete on the next open
        run = store.get_run(run_id)
        assert run.status == "incomplete" and "launcher gone" in (run.error or "")
        assert [r.size_bytes for r in store.rows(run_id)] == [8, 16]


def test_a_lost_server_during_a_write_is_a_fault(pg_server, pg_url: str) -> None:  # noqa: ANN001
    store = ResultStore(pg_url)
    run_id = store.create_run(RunInfo(kind="bench"))
    pg_server.kill()
    try:
        with pytest.raises(FaultError, match="lost the connection") as caught:
            store.add_rows(run_id, [row(8)])
    finally:
        pg_server.start_again()
        store.close()
    assert pg_server.password not in str(caught.value) and "\n" not in str(caught.value)


def test_every_reading_command_reads_a_postgres_store(pg_url: str, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from tests.cli.helpers import run_cli
    from tests.conftest import FIXTURES

    nccl_tests = FIXTURES / "nccl_tests"
    for name in ("v2.13_all_reduce_a100_8gpu_oci.txt", "v2.13_all_reduce_h100_2x8.txt"):
        imported = run_cli("import", "nccl-tests", str(nccl_tests / name), "--db", pg_url)
        assert imported.exit_code == 0, imported.output
    with ResultStore(pg_url) as store:
        first, second = [r.run_id for r in store.list_runs()]
    listed = run_cli("runs", "--db", pg_url, "--json")
    assert listed.exit_code == 0 and {r["run_id"] for r in __import__("json").loads(listed.stdout)} == {first, second}
    assert run_cli("runs", "show", first, "--db", pg_url).exit_code == 0
    assert run_cli("export", first, "--csv", "--db", pg_url).stdout.startswith("op,")
    assert run_cli("compare", first, second, "--db", pg_url).exit_code == 0
    assert run_cli("report", first, "-o", str(tmp_path / "r.html"), "--db", pg_url).exit_code == 0
    monkeypatch.setenv("LINKSCOPE_DB", pg_url)  # the environment variable takes a URL too
    calibrated = run_cli("calibrate", second, "--name", "pg-test")
    assert calibrated.exit_code == 0, calibrated.output


def test_concurrent_imports_of_one_file_store_it_once_on_postgres(pg_url: str) -> None:
    import threading

    from linkscope.results.nccltests import import_nccl_tests_file
    from tests.results.helpers import V2_13

    ResultStore(pg_url).close()
    start = threading.Barrier(6)
    results: list[bool] = []

    def one() -> None:
        with ResultStore(pg_url) as store:
            start.wait()
            results.append(import_nccl_tests_file(V2_13, store, "").already_imported)

    threads = [threading.Thread(target=one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] + [True] * 5
    with ResultStore(pg_url) as store:
        assert len(store.list_runs()) == 1
