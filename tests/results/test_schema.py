"""Schema versions and migrations, files that are not linkscope databases, and concurrent writers."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.results import schema
from linkscope.results.records import CollectiveRow, RunInfo
from linkscope.results.store import ResultStore


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def versions(path: Path) -> tuple[int, str]:
    with sqlite3.connect(path) as conn:
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        meta = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    return user_version, meta


def test_new_file_gets_the_latest_schema(tmp_path):
    path = tmp_path / "new.db"
    ResultStore(path).close()
    assert {"meta", "runs", "collective_rows", "pair_rows"} <= tables(path)
    assert versions(path) == (schema.latest_version(), str(schema.latest_version()))


def test_fake_v0_file_is_migrated(tmp_path):
    # Version 0: an SQLite file that exists but has no linkscope tables and no version yet.
    path = tmp_path / "v0.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 0")
        conn.execute("PRAGMA application_id = 0")
    with ResultStore(path) as store:
        store.create_run(RunInfo(kind="bench"))
    assert versions(path) == (schema.latest_version(), str(schema.latest_version()))


def test_migration_steps_run_in_order_and_keep_data(tmp_path, monkeypatch):
    path = tmp_path / "v1.db"
    with ResultStore(path) as store:
        run_id = store.create_run(RunInfo(kind="bench", label="before"))

    def to_next(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT 'migrated'")

    nxt = schema.latest_version() + 1
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + [(nxt, to_next)])
    with ResultStore(path) as store:
        assert store.get_run(run_id).label == "before"
    assert versions(path) == (nxt, str(nxt))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT note FROM runs").fetchone()[0] == "migrated"
    ResultStore(path).close()  # already at the newest: nothing runs twice


def test_a_version_1_file_gains_the_launcher_and_source_columns(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        schema._to_v1(conn)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO runs (run_id, kind, started_at, status) "
                     "VALUES ('abcd1234', 'bench', 'x', 'complete')")
    with ResultStore(path) as store:
        run = store.get_run("abcd1234")
    assert run.status == "complete" and run.launcher_pid is None and run.source_sha256 is None
    assert versions(path)[0] == schema.latest_version()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.db"
    ResultStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(UserError, match=r"future\.db.*schema version 99.*upgrade linkscope"):
        ResultStore(path)


def test_someone_elses_database_is_left_alone(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(UserError, match=r"other\.db: not a linkscope results database.*invoices"):
        ResultStore(path)
    assert tables(path) == {"invoices"}


@pytest.mark.parametrize("content", [b"this is not a database\n" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_corrupt_file_is_a_user_error_naming_the_path(tmp_path, content):
    path = tmp_path / "corrupt.db"
    path.write_bytes(content)
    with pytest.raises(UserError, match=r"corrupt\.db"):
        ResultStore(path)
    assert path.read_bytes() == content


def test_directory_at_the_path_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a file"):
        ResultStore(tmp_path)


WRITERS, BATCHES, BATCH_ROWS = 4, 25, 8


def _writer(path: str, index: int, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait()  # all processes open the new file at once: schema creation races too
    with ResultStore(Path(path)) as store:
        run_id = store.create_run(RunInfo(kind="bench", label=f"writer-{index}"))
        for batch in range(BATCHES):
            store.add_rows(run_id, [
                CollectiveRow(op="all_reduce", size_bytes=batch * BATCH_ROWS + i, count=1, dtype="float",
                              redop="sum", root=-1, placement="out_of_place", time_us=1.0, algbw=0.0, busbw=0.0,
                              nwrong=0)
                for i in range(BATCH_ROWS)])
        store.finish_run(run_id, "complete")


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "shared.db"
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    start = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(str(path), i, start)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    with ResultStore(path) as store:
        runs = store.list_runs()
        assert sorted(r.label for r in runs) == sorted(f"writer-{i}" for i in range(WRITERS))
        for run in runs:
            assert run.status == "complete" and run.n_rows == BATCHES * BATCH_ROWS
            sizes = [r.size_bytes for r in store.rows(run.run_id)]
            assert sizes == list(range(BATCHES * BATCH_ROWS))
