"""Where the results store lives (an SQLite file or a PostgreSQL URL) and one connection to it.

The store writes its SQL once, in SQLite's spelling (`?` and `:name` placeholders), and `Database` runs it on either
engine: for PostgreSQL (psycopg 3) the placeholders are translated and the few statements that differ come from
`fragment()`. A URL is never printed as given: `display` drops the password, so no message can leak it.

    location = DbLocation.parse("postgresql://ci@db.example/linkscope")   # or a path, or None for the default
    db = connect(location)           # UserError naming the location (without the password) when it cannot
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from platformdirs import user_data_dir

from linkscope.hardware.errors import FaultError, UserError

DB_ENV = "LINKSCOPE_DB"
URL_SCHEMES = ("postgresql", "postgres")
BUSY_TIMEOUT_MS = 30_000
"""How long an SQLite writer waits for another writer's transaction (runs commit every few rows)."""
CONNECT_TIMEOUT_S = 10
"""How long a PostgreSQL connection attempt may take before the server counts as unreachable."""


def default_db_path() -> Path:
    """The default SQLite file: `$LINKSCOPE_DB` when it names a file, else `runs.db` in the user data directory."""
    env = os.environ.get(DB_ENV)
    if env and not is_url(env):
        return Path(env).expanduser()
    return Path(user_data_dir("linkscope")) / "runs.db"


def is_url(value: str) -> bool:
    """Whether a `--db` value names a PostgreSQL database rather than a file."""
    return value.split("://", 1)[0].lower() in URL_SCHEMES and "://" in value


def redact(url: str) -> str:
    """The URL without its password (`postgresql://user:***@host/db`): what every message shows."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
        query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return f"{url.split('://', 1)[0]}://(unreadable URL)"


_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@?#]*):[^\s/]*@")
_KV_PASSWORD = re.compile(r"(?i)\b(password=)[^&\s'\"]*")


def redact_text(text: str) -> str:
    """Any text (a command line, a config value) with every URL's password and every `password=` value replaced by
    `***`: what is stored, logged and printed, so that a `--db postgresql://user:PW@host/db` never leaks."""
    return _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))


def redact_values(value: Any) -> Any:
    """`redact_text` applied to every string inside nested dicts, lists and tuples (a run's config)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_values(v) for v in value)
    return value


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _refuse_other_scheme(value: str, where: str) -> None:
    match = _SCHEME.match(value)
    if match and match.group(1).lower() not in URL_SCHEMES:
        raise UserError(f"{where}: '{match.group(1)}://' is not a store linkscope can use (an SQLite file path, or "
                        f"postgresql://user@host/db)")


@dataclass(frozen=True)
class DbLocation:
    """An SQLite file (`path`) or a PostgreSQL database (`url`)."""

    path: Path | None = None
    url: str | None = None

    @classmethod
    def parse(cls, value: str | Path | None) -> DbLocation:
        """`--db` as given; None means `$LINKSCOPE_DB`, else the file in the user data directory. Both follow one
        rule: a `postgresql://` URL, or a file path; any other `scheme://` is refused, not taken as a path."""
        if value is None or str(value) == "":
            env = os.environ.get(DB_ENV)
            if env:
                _refuse_other_scheme(env, DB_ENV)
            return cls(url=env) if env and is_url(env) else cls(path=default_db_path())
        if isinstance(value, str):
            _refuse_other_scheme(value, "--db")
            if is_url(value):
                return cls(url=value)
        return cls(path=Path(value).expanduser())

    @property
    def is_postgres(self) -> bool:
        """Whether this is a PostgreSQL database."""
        return self.url is not None

    @property
    def display(self) -> str:
        """How messages name it: the file path, or the URL without its password."""
        return redact(self.url) if self.url is not None else str(self.path)

    @property
    def files_dir(self) -> Path:
        """Where files that belong beside the runs (traces) go: next to an SQLite file, else the data directory."""
        return self.path.parent if self.path is not None else Path(user_data_dir("linkscope"))

    def __str__(self) -> str:
        return self.display


class Row(dict):
    """A result row readable by column name or by position, as sqlite3.Row is."""

    def __init__(self, names: Sequence[str], values: Sequence[Any]) -> None:
        super().__init__(zip(names, values))
        self._values = tuple(values)

    def __getitem__(self, key: Any) -> Any:
        return self._values[key] if isinstance(key, int) else super().__getitem__(key)


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def to_pyformat(sql: str) -> str:
    """SQLite placeholders (`?`, `:name`) as psycopg's (`%s`, `%(name)s`); a literal `%` doubled."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%")).replace("?", "%s")


# Statements whose spelling differs between the engines; everything else is written once.
_FRAGMENTS = {
    "sqlite": {"group_concat_ops": "GROUP_CONCAT(DISTINCT c.op)", "insertion_order": "r.rowid DESC"},
    "postgresql": {"group_concat_ops": "STRING_AGG(DISTINCT c.op, ',')", "insertion_order": "r.run_id DESC"},
}


class Database:
    """One connection, either engine. Not shared between threads or processes."""

    def __init__(self, location: DbLocation, conn: Any, dialect: str) -> None:
        self.location = location
        self.conn = conn
        self.dialect = dialect

    def fragment(self, name: str) -> str:
        """A piece of SQL spelled for this engine."""
        return _FRAGMENTS[self.dialect][name]

    def execute(self, sql: str, params: Any = ()) -> Any:
        """Run one statement; the cursor iterates over rows readable by name or position."""
        if self.dialect == "sqlite":
            return self.conn.execute(sql, params)
        with _faults(self.location):
            return self.conn.execute(to_pyformat(sql), params or None)

    def executemany(self, sql: str, rows: list[Any]) -> None:
        """Run one statement once per parameter set."""
        if self.dialect == "sqlite":
            self.conn.executemany(sql, rows)
            return
        with _faults(self.location), self.conn.cursor() as cur:
            cur.executemany(to_pyformat(sql), rows)

    def write(self, sql: str, params: Any = ()) -> int:
        """One statement committed on its own (atomic on both engines); returns the rows it changed."""
        if self.dialect == "postgresql":
            return int(self.execute(sql, params).rowcount)  # autocommit: one round trip, no BEGIN/COMMIT
        with self.transaction():
            return int(self.conn.execute(sql, params).rowcount)

    def insert_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert rows (dicts with the same keys) in one atomic statement or transaction."""
        if not rows:
            return
        names = list(rows[0])
        if self.dialect == "sqlite":
            with self.transaction():
                self.conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) "
                                      f"VALUES ({', '.join(':' + n for n in names)})", rows)
            return
        # One multi-row INSERT: atomic in autocommit and a single round trip, however many rows (a busy server
        # shared by many writers pays per round trip, not per row).
        one = "(" + ", ".join(["%s"] * len(names)) + ")"
        sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES " + ", ".join([one] * len(rows))
        with _faults(self.location):
            self.conn.execute(sql, [row[n] for row in rows for n in names])

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """A write transaction: committed at the end, rolled back on any exception."""
        if self.dialect == "postgresql":
            with _faults(self.location), self.conn.transaction():
                yield self
            return
        # IMMEDIATE takes SQLite's write lock up front, so the busy timeout applies instead of a late deadlock.
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection."""
        # A connection to a server that died cannot be closed cleanly; there is nothing left to release.
        with contextlib.suppress(Exception):
            self.conn.close()


def integrity_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a duplicate key raises on either engine."""
    errors: list[type[BaseException]] = [sqlite3.IntegrityError]
    try:
        import psycopg

        errors.append(psycopg.IntegrityError)
    except ImportError:
        pass
    return tuple(errors)


@contextmanager
def _faults(location: DbLocation) -> Iterator[None]:
    """A lost server mid-run is a fault (exit 3), named by its redacted URL, never with psycopg's long text."""
    import psycopg

    try:
        yield
    except psycopg.OperationalError as exc:
        raise FaultError(f"{location.display}: lost the connection to the results database "
                         f"({error_line(exc, location)})") from None
    except psycopg.errors.InFailedSqlTransaction as exc:  # the rest of a transaction the server broke off
        raise FaultError(f"{location.display}: the results database broke off a transaction "
                         f"({error_line(exc, location)})") from None


def error_line(exc: BaseException, location: DbLocation) -> str:
    """The first line of a driver's message, with the URL's password (if it appears) masked."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if location.url:
        try:
            password = urlsplit(location.url).password
        except ValueError:  # an unparsable URL: mask everything between "://" and "@"
            password = location.url.split("://", 1)[-1].rsplit("@", 1)[0] if "@" in location.url else None
        if password:
            text = text.replace(password, "***")
    return text


def connect(location: DbLocation) -> Database:
    """Open the database (SQLite file or PostgreSQL URL); every failure is a UserError naming it."""
    if location.url is not None:
        return _connect_postgres(location)
    assert location.path is not None
    return Database(location, _connect_sqlite(location.path), "sqlite")


def _connect_postgres(location: DbLocation) -> Database:
    try:
        import psycopg
    except ImportError:
        raise UserError(f"{location.display}: a PostgreSQL store needs psycopg 3 "
                        "(pip install 'linkscope[postgres]')") from None
    assert location.url is not None
    try:
        conn = psycopg.connect(location.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                               row_factory=_row_factory)
    except psycopg.Error as exc:
        raise UserError(f"{location.display}: cannot connect to the results database "
                        f"({error_line(exc, location)})") from None
    except ValueError as exc:  # a malformed URL or option
        raise UserError(f"{location.display}: not a usable PostgreSQL URL ({error_line(exc, location)})") from None
    return Database(location, conn, "postgresql")


def _row_factory(cursor: Any) -> Any:
    names = [c.name for c in cursor.description] if cursor.description else []

    def make(values: Sequence[Any]) -> Row:
        return Row(names, values)

    return make


def _connect_sqlite(path: Path) -> sqlite3.Connection:
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
        _configure_sqlite(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise UserError(f"{path}: not a usable linkscope results database ({exc})") from exc
    return conn


def _configure_sqlite(conn: sqlite3.Connection) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Reading the schema first makes a non-SQLite file fail here, before anything is written to it.
    tables = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    # Switching the journal rewrites the file's header: only a new file or one linkscope versioned is switched
    # here, so that someone else's database is refused (by the migration's check) exactly as it was found.
    if tables == 0 or conn.execute("PRAGMA user_version").fetchone()[0] > 0:
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
