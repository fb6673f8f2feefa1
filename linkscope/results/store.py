"""The results store: every run, its collective rows and its pairwise rows, in one SQLite file (the default) or a
PostgreSQL database a team shares (`postgresql://...`; `results.database` runs the same SQL on both).

Writes are short transactions committed as they happen, so a run that dies midway keeps what it measured, and
several processes can write at once (SQLite: WAL journal, a busy timeout; PostgreSQL: one atomic statement per
write). One connection per store.

    store = ResultStore()                       # $LINKSCOPE_DB (a file or a URL) or the user data dir
    run_id = store.create_run(RunInfo(kind="bench", label="h100-node"))
    store.add_rows(run_id, rows)
    store.finish_run(run_id, "complete")
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from linkscope.hardware.errors import UserError
from linkscope.results import codec
from linkscope.results.database import (DB_ENV, Database, DbLocation, connect, default_db_path, error_line,
                                        integrity_errors, redact_values)
from linkscope.results.records import CollectiveRow, PairRow, RunInfo, RunKind, RunStatus
from linkscope.results.schema import migrate, user_version

__all__ = ["DB_ENV", "DbLocation", "ResultStore", "RunSummary", "default_db_path", "pid_alive", "require_existing",
           "utc_now"]

StoreLocation = str | Path | DbLocation | None
"""What `--db` gives: a file path, a `postgresql://` URL, a parsed location, or None for the default."""


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

_REDACTED_FIELDS = frozenset({"command", "config", "extra", "error", "label"})
"""Run fields that may hold a user-typed URL: passwords are removed from them before they are stored."""

MAX_RUN_ID_CHARS = 64
"""Longer than any id linkscope writes (8 hex characters, or a uuid)."""


class ResultStore:
    """Runs and their rows in an SQLite file or a PostgreSQL database. One connection per instance: use one store
    per process (and per thread)."""

    def __init__(self, location: StoreLocation = None) -> None:
        self.location = location if isinstance(location, DbLocation) else DbLocation.parse(location)
        self._conn = _open(self.location)
        self._mark_abandoned_runs()

    @property
    def path(self) -> Path | None:
        """The SQLite file (None for a PostgreSQL store)."""
        return self.location.path

    @property
    def where(self) -> str:
        """How messages name this store: the file, or the URL without its password."""
        return self.location.display

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Database]:
        with self._conn.transaction() as conn:
            yield conn

    def create_run(self, info: RunInfo) -> str:
        """Store a new run and return its id (8 hex characters).

        `info` is updated in place too: its run_id is set, started_at to now unless given, status to running.
        """
        # A password in a --db URL (or any URL) on the command line or in the options is never stored.
        redacted = {k: redact_values(getattr(info, k)) for k in _REDACTED_FIELDS}
        for _ in range(5):
            run = replace(info, **redacted, run_id=uuid.uuid4().hex[:8], started_at=info.started_at or utc_now(),
                          status="running",
                          launcher_pid=info.launcher_pid if info.launcher_pid is not None else os.getpid(),
                          launcher_host=info.launcher_host or socket.gethostname())
            try:
                self._conn.insert_rows("runs", [codec.run_values(run)])
            except integrity_errors():
                continue  # 8 hex characters can collide in a large store; draw again
            info.run_id, info.started_at, info.status = run.run_id, run.started_at, run.status
            info.launcher_pid, info.launcher_host = run.launcher_pid, run.launcher_host
            return run.run_id
        raise RuntimeError("could not draw an unused run id")

    def add_rows(self, run_id: str, rows: list[CollectiveRow]) -> None:
        """Append collective rows to a run, committed at once."""
        self._insert(run_id, "collective_rows", [{**codec.row_values(r), "run_id": run_id} for r in rows])

    def add_pair_rows(self, run_id: str, rows: list[PairRow]) -> None:
        """Append pairwise rows to a run, committed at once."""
        self._insert(run_id, "pair_rows", [{**codec.pair_values(r), "run_id": run_id} for r in rows])

    def _insert(self, run_id: str, table: str, values: list[dict[str, Any]]) -> None:
        # The foreign key on run_id refuses rows of an unknown run; no separate look-up (a round trip per size).
        try:
            self._conn.insert_rows(table, values)
        except integrity_errors():
            self._require(run_id)
            raise

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Set some of a run's metadata fields (system, groups, extra, versions, ...); run_id cannot change."""
        unknown = sorted((set(fields) - set(codec.RUN_FIELDS)) | ({"run_id"} & set(fields)))
        if unknown:
            raise TypeError(f"update_run: unknown or read-only field(s) {', '.join(unknown)}")
        if not fields:
            self._require(run_id)
            return
        values = {k: codec.run_field(k, redact_values(v) if k in _REDACTED_FIELDS else v) for k, v in fields.items()}
        assignments = ", ".join(f"{k} = :{k}" for k in values)
        # One round trip: the statement's own row count says whether the run exists.
        if self._conn.write(f"UPDATE runs SET {assignments} WHERE run_id = :run_id", {**values, "run_id": run_id}) == 0:
            self._require(run_id)

    def set_nccl_choices(self, run_id: str, rows: list[CollectiveRow]) -> None:
        """Store what NCCL chose (algorithm, protocol, channels) on a run's rows of the same op and size."""
        with self._write() as conn:
            for row in rows:
                conn.execute("UPDATE collective_rows SET nccl_algo = ?, nccl_proto = ?, nccl_channels = ? "
                             "WHERE run_id = ? AND op = ? AND size_bytes = ?",
                             (row.nccl_algo, row.nccl_proto, row.nccl_channels, run_id, row.op, row.size_bytes))

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

    def create_import_run(self, info: RunInfo) -> tuple[str, bool]:
        """Store an imported run unless a run of the same file content (`info.source_sha256`) is stored already:
        (run id, True) for the new run, (the earlier run's id, False) otherwise. The look-up and the insert are one
        transaction holding the write lock (SQLite) or a lock on the content hash (PostgreSQL), so concurrent
        imports of one file store it once."""
        digest = info.source_sha256
        if not digest:
            return self.create_run(info), True
        redacted = {k: redact_values(getattr(info, k)) for k in _REDACTED_FIELDS}
        pid = info.launcher_pid if info.launcher_pid is not None else os.getpid()
        run = replace(info, **redacted, run_id=uuid.uuid4().hex[:8], started_at=info.started_at or utc_now(),
                      status="running", launcher_pid=pid, launcher_host=info.launcher_host or socket.gethostname())
        values = codec.run_values(run)
        with self._write() as conn:
            if conn.dialect == "postgresql":
                conn.execute("SELECT pg_advisory_xact_lock(?)", (int(digest[:15], 16),))
            row = conn.execute("SELECT run_id FROM runs WHERE source_sha256 = ? ORDER BY started_at LIMIT 1",
                               (digest,)).fetchone()
            if row is not None:
                return str(row["run_id"]), False
            conn.execute(f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join(':' + n for n in values)})",
                         values)
        info.run_id, info.started_at, info.status = run.run_id, run.started_at, run.status
        info.launcher_pid, info.launcher_host = run.launcher_pid, run.launcher_host
        return run.run_id, True

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        """Mark a run as ended now with `status` (complete, incomplete or failed) and an optional error."""
        self.update_run(run_id, status=status, error=error, ended_at=utc_now())

    def list_runs(self, limit: int | None = None, kind: str | None = None,
                  label: str | None = None) -> list[RunSummary]:
        """Runs newest first, optionally only one kind or one label."""
        where, params = _filters(kind=kind, label=label)
        ops = self._conn.fragment("group_concat_ops")
        sql = (f"SELECT r.*, {_COUNT_ROWS} AS n_rows, (SELECT {ops} FROM collective_rows c WHERE c.run_id = r.run_id)"
               f" AS ops, {_HAS_PAIRS} AS has_pairs "
               f"FROM runs r {where} ORDER BY r.started_at DESC, {self._conn.fragment('insertion_order')}")
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
        if len(prefix) > MAX_RUN_ID_CHARS:
            # Stored ids are short hex; a long one is a typo or a pasted file, and would only strain the query.
            raise UserError(f"run id '{prefix[:20]}...' has {len(prefix):,} characters; ids have at most "
                            f"{MAX_RUN_ID_CHARS}")
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        ids = [str(r[0]) for r in self._conn.execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' ORDER BY run_id", (pattern,))]
        if prefix in ids:
            return prefix
        if not ids:
            raise UserError(f"no run '{run_id}' in {self.where} (see `linkscope runs`)")
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
            raise UserError(f"no run '{run_id}' in {self.where}")


_COUNT_ROWS = ("((SELECT COUNT(*) FROM collective_rows c WHERE c.run_id = r.run_id)"
               " + (SELECT COUNT(*) FROM pair_rows p WHERE p.run_id = r.run_id))")
_HAS_PAIRS = "EXISTS (SELECT 1 FROM pair_rows p WHERE p.run_id = r.run_id)"


def _filters(**equal: str | None) -> tuple[str, list[Any]]:
    clauses = [(f"r.{k} = ?", v) for k, v in equal.items() if v is not None]
    if not clauses:
        return "", []
    return "WHERE " + " AND ".join(c for c, _ in clauses), [v for _, v in clauses]


def _summary(row: Any) -> RunSummary:
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


def require_existing(location: StoreLocation) -> DbLocation:
    """For read-only commands: the database must already exist (a typo must not create an empty one). A
    PostgreSQL database exists on its server; it must hold linkscope's tables."""
    resolved = location if isinstance(location, DbLocation) else DbLocation.parse(location)
    if resolved.is_postgres:
        db = connect(resolved)
        try:
            if user_version(db) == 0:
                raise UserError(f"{resolved.display}: no linkscope results there yet (run `linkscope bench` with "
                                "this --db first)")
        finally:
            db.close()
        return resolved
    assert resolved.path is not None
    if not resolved.path.is_file():
        raise UserError(f"{resolved.path}: no results database there (run `linkscope bench` or `linkscope import` "
                        "first)")
    _require_sqlite_store(resolved.path)
    return resolved


def _require_sqlite_store(path: Path) -> None:
    """The file already is a linkscope store: opening anything else would turn it into one (an empty file
    becomes a database on the first schema write), so read it read-only first and refuse what it is not."""
    import sqlite3

    with open(path, "rb") as fh:
        header = fh.read(16)
    if not header:
        raise UserError(f"{path}: an empty file, not a results database (nothing stored there yet)")
    if header != b"SQLite format 3\x00":
        raise UserError(f"{path}: not a linkscope results database (not an SQLite file)")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UserError(f"{path}: not a usable linkscope results database ({exc})") from None
    if version == 0:
        raise UserError(f"{path}: an SQLite file without linkscope results (nothing stored there yet)")


def _open(location: DbLocation) -> Database:
    """Connect and migrate; any failure of the engine becomes a UserError naming the location."""
    import sqlite3

    db = connect(location)
    try:
        migrate(db, location.display)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise UserError(f"{location.display}: not a usable linkscope results database ({exc})") from exc
    except UserError:
        db.close()
        raise
    except Exception as exc:
        db.close()
        if type(exc).__module__.startswith("psycopg"):
            raise UserError(f"{location.display}: not a usable linkscope results database "
                            f"({error_line(exc, location)})") from None
        raise
    except BaseException:
        db.close()
        raise
    return db
