"""The results store: every run, its collective rows and its pairwise rows, in one SQLite file.

Writes are short transactions committed as they happen, so a run that dies midway keeps what it measured, and
several processes can write to the same file at once (WAL journal, a busy timeout, one connection per store).

    store = ResultStore()                       # $LINKSCOPE_DB or the user data dir
    run_id = store.create_run(RunInfo(kind="bench", label="h100-node"))
    store.add_rows(run_id, rows)
    store.finish_run(run_id, "complete")
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from platformdirs import user_data_dir

from linkscope.hardware.errors import UserError
from linkscope.results import codec
from linkscope.results.records import CollectiveRow, PairRow, RunInfo, RunKind, RunStatus
from linkscope.results.schema import migrate

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another writer's transaction before giving up (runs commit every few rows)."""

DB_ENV = "LINKSCOPE_DB"


def default_db_path() -> Path:
    """`$LINKSCOPE_DB` if set, else `runs.db` in the user data directory for linkscope."""
    env = os.environ.get(DB_ENV)
    return Path(env).expanduser() if env else Path(user_data_dir("linkscope")) / "runs.db"


def utc_now() -> str:
    """The current time as ISO 8601 in UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunSummary:
    """One line of `linkscope runs`: a run's metadata and how much it holds."""

    run_id: str
    kind: RunKind
    label: str
    started_at: str
    ended_at: str | None
    status: RunStatus
    hosts: list[str] = field(default_factory=list)
    world_size: int = 0
    backend: str = ""
    n_rows: int = 0
    """Collective rows plus pairwise rows."""
    ops: list[str] = field(default_factory=list)
    """Collective ops measured, sorted; `p2p` when the run has pairwise rows."""


class ResultStore:
    """Runs and their rows in one SQLite file. One connection per instance: use one store per process."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self._conn = _open(self.path)
        self._mark_abandoned_runs()

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so the busy timeout applies instead of a late deadlock error.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def create_run(self, info: RunInfo) -> str:
        """Store a new run and return its id (8 hex characters).

        `info` is updated in place too: its run_id is set, started_at to now unless given, status to running.
        """
        for _ in range(5):
            run = replace(info, run_id=uuid.uuid4().hex[:8], started_at=info.started_at or utc_now(),
                          status="running",
                          launcher_pid=info.launcher_pid if info.launcher_pid is not None else os.getpid(),
                          launcher_host=info.launcher_host or socket.gethostname())
            try:
                with self._write() as conn:
                    conn.execute(codec.insert_sql("runs", codec.RUN_FIELDS), codec.run_values(run))
            except sqlite3.IntegrityError:
                continue  # 8 hex characters can collide in a large store; draw again
            info.run_id, info.started_at, info.status = run.run_id, run.started_at, run.status
            info.launcher_pid, info.launcher_host = run.launcher_pid, run.launcher_host
            return run.run_id
        raise RuntimeError("could not draw an unused run id")

    def add_rows(self, run_id: str, rows: list[CollectiveRow]) -> None:
        """Append collective rows to a run, committed at once."""
        self._require(run_id)
        sql = codec.insert_sql("collective_rows", codec.ROW_FIELDS)
        with self._write() as conn:
            conn.executemany(sql, [{**codec.row_values(r), "run_id": run_id} for r in rows])

    def add_pair_rows(self, run_id: str, rows: list[PairRow]) -> None:
        """Append pairwise rows to a run, committed at once."""
        self._require(run_id)
        sql = codec.insert_sql("pair_rows", codec.PAIR_FIELDS)
        with self._write() as conn:
            conn.executemany(sql, [{**codec.pair_values(r), "run_id": run_id} for r in rows])

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Set some of a run's metadata fields (system, groups, extra, versions, ...); run_id cannot change."""
        unknown = sorted((set(fields) - set(codec.RUN_FIELDS)) | ({"run_id"} & set(fields)))
        if unknown:
            raise TypeError(f"update_run: unknown or read-only field(s) {', '.join(unknown)}")
        self._require(run_id)
        if not fields:
            return
        values = {k: codec.run_field(k, v) for k, v in fields.items()}
        assignments = ", ".join(f"{k} = :{k}" for k in values)
        with self._write() as conn:
            conn.execute(f"UPDATE runs SET {assignments} WHERE run_id = :run_id", {**values, "run_id": run_id})

    def _mark_abandoned_runs(self) -> None:
        """Runs still `running` whose launcher on this host no longer exists were killed (SIGKILL, power):
        mark them incomplete so they do not stay `running` for ever. Other hosts' runs cannot be checked."""
        host = socket.gethostname()
        rows = self._conn.execute("SELECT run_id, launcher_pid, error FROM runs WHERE status = 'running' "
                                  "AND launcher_host = ? AND launcher_pid IS NOT NULL", (host,)).fetchall()
        gone = [row for row in rows if not pid_alive(int(row["launcher_pid"]))]
        if not gone:
            return
        with self._write() as conn:
            for row in gone:
                note = f"launcher gone (pid {row['launcher_pid']} on {host} no longer exists)"
                error = f"{row['error']}; {note}" if row["error"] else note
                conn.execute("UPDATE runs SET status = 'incomplete', error = ?, ended_at = ? "
                             "WHERE run_id = ? AND status = 'running'", (error, utc_now(), row["run_id"]))

    def find_import(self, source_sha256: str) -> str | None:
        """The id of a run imported from a file with this content hash, if any."""
        row = self._conn.execute("SELECT run_id FROM runs WHERE source_sha256 = ? ORDER BY started_at LIMIT 1",
                                 (source_sha256,)).fetchone()
        return None if row is None else str(row["run_id"])

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        """Mark a run as ended now with `status` (complete, incomplete or failed) and an optional error."""
        self.update_run(run_id, status=status, error=error, ended_at=utc_now())

    def list_runs(self, limit: int | None = None, kind: str | None = None,
                  label: str | None = None) -> list[RunSummary]:
        """Runs newest first, optionally only one kind or one label."""
        where, params = _filters(kind=kind, label=label)
        sql = (f"SELECT r.*, {_COUNT_ROWS} AS n_rows, {_OPS} AS ops, {_HAS_PAIRS} AS has_pairs "
               f"FROM runs r {where} ORDER BY r.started_at DESC, r.rowid DESC")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, limit))
        return [_summary(row) for row in self._conn.execute(sql, params)]

    def get_run(self, run_id: str) -> RunInfo:
        """The run with this id or unique id prefix; UserError when none or several match."""
        row = self._conn.execute("SELECT * FROM runs WHERE run_id = ?", (self.resolve(run_id),)).fetchone()
        return codec.run_from_row(row)

    def resolve(self, run_id: str) -> str:
        """The full id of the one run whose id starts with `run_id`; UserError when none or several do."""
        prefix = run_id.strip().lower()
        if not prefix:
            raise UserError("empty run id")
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        ids = [str(r[0]) for r in self._conn.execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' ORDER BY run_id", (pattern,))]
        if prefix in ids:
            return prefix
        if not ids:
            raise UserError(f"no run '{run_id}' in {self.path} (see `linkscope runs`)")
        if len(ids) > 1:
            raise UserError(f"run id '{run_id}' is ambiguous: it matches {', '.join(ids[:5])}"
                            f"{' ...' if len(ids) > 5 else ''}; give more characters")
        return ids[0]

    def rows(self, run_id: str, op: str | None = None) -> list[CollectiveRow]:
        """A run's collective rows in the order they were added, optionally one op only."""
        full = self.resolve(run_id)
        sql, params = "SELECT * FROM collective_rows WHERE run_id = ?", [full]
        if op is not None:
            sql, params = sql + " AND op = ?", params + [op]
        return [codec.row_from_db(r) for r in self._conn.execute(sql + " ORDER BY id", params)]

    def pair_rows(self, run_id: str) -> list[PairRow]:
        """A run's pairwise rows in the order they were added."""
        full = self.resolve(run_id)
        cur = self._conn.execute("SELECT * FROM pair_rows WHERE run_id = ? ORDER BY id", (full,))
        return [codec.pair_from_db(r) for r in cur]

    def delete_run(self, run_id: str) -> str:
        """Delete a run and its rows; returns the full id that was deleted."""
        full = self.resolve(run_id)
        with self._write() as conn:
            conn.execute("DELETE FROM collective_rows WHERE run_id = ?", (full,))
            conn.execute("DELETE FROM pair_rows WHERE run_id = ?", (full,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (full,))
        return full

    def _require(self, run_id: str) -> None:
        if self._conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            raise UserError(f"no run '{run_id}' in {self.path}")


_COUNT_ROWS = ("((SELECT COUNT(*) FROM collective_rows c WHERE c.run_id = r.run_id)"
               " + (SELECT COUNT(*) FROM pair_rows p WHERE p.run_id = r.run_id))")
_OPS = "(SELECT GROUP_CONCAT(DISTINCT c.op) FROM collective_rows c WHERE c.run_id = r.run_id)"
_HAS_PAIRS = "EXISTS (SELECT 1 FROM pair_rows p WHERE p.run_id = r.run_id)"


def _filters(**equal: str | None) -> tuple[str, list[Any]]:
    clauses = [(f"r.{k} = ?", v) for k, v in equal.items() if v is not None]
    if not clauses:
        return "", []
    return "WHERE " + " AND ".join(c for c, _ in clauses), [v for _, v in clauses]


def _summary(row: sqlite3.Row) -> RunSummary:
    info = codec.run_from_row(row)
    ops = sorted(set(row["ops"].split(","))) if row["ops"] else []
    if row["has_pairs"]:
        ops.append("p2p")
    return RunSummary(run_id=info.run_id, kind=info.kind, label=info.label, started_at=info.started_at,
                      ended_at=info.ended_at, status=info.status, hosts=info.hosts, world_size=info.world_size,
                      backend=info.backend, n_rows=int(row["n_rows"]), ops=ops)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    try:
        # A killed launcher reaped by nobody yet is a zombie: it will never finish the run.
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def require_existing(path: Path | None) -> Path:
    """For read-only commands: the database must already exist (a typo must not create an empty one)."""
    resolved = Path(path) if path is not None else default_db_path()
    if not resolved.is_file():
        raise UserError(f"{resolved}: no results database there (run `linkscope bench` or `linkscope import` first)")
    return resolved


def _open(path: Path) -> sqlite3.Connection:
    """Connect, configure for concurrent writers, and migrate; any SQLite failure becomes a UserError naming path."""
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: results database path is not a file")
    # A typo in --db must not grow a directory tree; only the default location is created.
    if not path.parent.is_dir() and path != default_db_path():
        raise UserError(f"{path}: directory {path.parent} does not exist")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise UserError(f"{path}: cannot open results database ({exc})") from exc
    try:
        _configure(conn)
        migrate(conn, str(path))
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise UserError(f"{path}: not a usable linkscope results database ({exc})") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _configure(conn: sqlite3.Connection) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Reading the schema first makes a non-SQLite file fail here, before anything is written to it.
    conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    _enable_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (persistent, so once per file), retrying while another process holds a lock.

    SQLite does not call the busy handler for a journal-mode change, so two processes creating the same new
    file would otherwise see "database is locked" at once.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
