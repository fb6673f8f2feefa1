"""The SQLite schema of the results store and the steps that bring an older file up to date.

The schema version lives in `PRAGMA user_version` (cheap to read before anything else) and is mirrored in the
`meta` table (readable by anyone inspecting the file). Each entry of `MIGRATIONS` takes a database from the
version before it to its own version; `migrate` runs the missing ones in order inside one write transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from linkscope.hardware.errors import UserError

Migration = Callable[[sqlite3.Connection], None]

_V1_TABLES = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id     TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    label      TEXT NOT NULL DEFAULT '',
    started_at TEXT NOT NULL,
    ended_at   TEXT,
    status     TEXT NOT NULL,
    hosts      TEXT NOT NULL DEFAULT '[]',
    world_size INTEGER NOT NULL DEFAULT 0,
    nodes      INTEGER NOT NULL DEFAULT 1,
    backend    TEXT NOT NULL DEFAULT '',
    versions   TEXT NOT NULL DEFAULT '{}',
    nccl_env   TEXT NOT NULL DEFAULT '{}',
    system     TEXT,
    config     TEXT NOT NULL DEFAULT '{}',
    groups     TEXT NOT NULL DEFAULT '{}',
    command    TEXT NOT NULL DEFAULT '',
    error      TEXT,
    extra      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at);
CREATE TABLE IF NOT EXISTS collective_rows (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    op            TEXT NOT NULL,
    size_bytes    INTEGER NOT NULL,
    count         INTEGER NOT NULL,
    dtype         TEXT NOT NULL,
    redop         TEXT NOT NULL,
    root          INTEGER NOT NULL,
    placement     TEXT NOT NULL,
    time_us       REAL NOT NULL,
    algbw         REAL NOT NULL,
    busbw         REAL NOT NULL,
    nwrong        INTEGER,
    world_size    INTEGER NOT NULL DEFAULT 0,
    iters         INTEGER NOT NULL DEFAULT 0,
    repeats       INTEGER NOT NULL DEFAULT 1,
    time_us_min   REAL,
    time_us_max   REAL,
    time_us_stdev REAL,
    times_us      TEXT NOT NULL DEFAULT '[]',
    max_error     REAL,
    iter_stats    TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS collective_rows_run ON collective_rows (run_id, op);
CREATE TABLE IF NOT EXISTS pair_rows (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    src          INTEGER NOT NULL,
    dst          INTEGER NOT NULL,
    size_bytes   INTEGER NOT NULL,
    uni_gb_per_s REAL,
    bi_gb_per_s  REAL,
    latency_us   REAL
);
CREATE INDEX IF NOT EXISTS pair_rows_run ON pair_rows (run_id);
"""

_OUR_TABLES = frozenset({"meta", "runs", "collective_rows", "pair_rows", "sqlite_sequence"})


def _to_v1(conn: sqlite3.Connection) -> None:
    """Version 0 is a file with no linkscope tables yet (new, or empty): create them."""
    for statement in _V1_TABLES.split(";"):
        if statement.strip():
            conn.execute(statement)


def _to_v2(conn: sqlite3.Connection) -> None:
    """Who launched a run (to spot runs left `running` by a killed launcher) and an import's content hash."""
    conn.execute("ALTER TABLE runs ADD COLUMN launcher_pid INTEGER")
    conn.execute("ALTER TABLE runs ADD COLUMN launcher_host TEXT")
    conn.execute("ALTER TABLE runs ADD COLUMN source_sha256 TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_source ON runs (source_sha256)")


MIGRATIONS: list[tuple[int, Migration]] = [(1, _to_v1), (2, _to_v2)]
"""(version reached, step) in ascending order; append a step to change the schema, never edit an old one."""


def latest_version() -> int:
    """The schema version this code writes."""
    return MIGRATIONS[-1][0]


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the file (0 for a new file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Bring the database to `latest_version()`; refuse files from a newer linkscope or not made by linkscope.

    Runs in one IMMEDIATE transaction and re-reads the version inside it, so that several processes opening
    the same new file at once migrate it exactly once.
    """
    if user_version(conn) == latest_version():
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        _migrate_locked(conn, path)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _migrate_locked(conn: sqlite3.Connection, path: str) -> None:
    current = user_version(conn)
    if current > latest_version():
        raise UserError(f"{path}: results database has schema version {current}, but this linkscope only knows "
                        f"up to {latest_version()}; upgrade linkscope to read it")
    if current == 0:
        _refuse_foreign(conn, path)
    for version, step in MIGRATIONS:
        if version > current:
            step(conn)
            current = version
    conn.execute(f"PRAGMA user_version = {current}")
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(current),))


def _refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """An unversioned file with tables that are not ours is someone else's database: leave it alone."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    foreign = sorted(names - _OUR_TABLES)
    if foreign:
        raise UserError(f"{path}: not a linkscope results database (it has tables {', '.join(foreign)})")
