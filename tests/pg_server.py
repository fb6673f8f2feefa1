"""A throwaway PostgreSQL server for the tests and the store benchmark: Debian's `postgresql` binaries, `initdb` into a
temporary directory as an unprivileged user, password authentication, a free port on 127.0.0.1.

    server = PgServer.start()          # None-safe: PgServer.missing() says why it cannot start
    url = server.create_database()     # a fresh, empty database per caller
    server.stop()
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

USER = "linkscope"
_RUN_AS = ("postgres", "nobody")
"""initdb refuses to run as root; under root (CI) the server runs as the first of these system users."""


def bin_dir() -> Path | None:
    """Where initdb and pg_ctl are: on PATH, else Debian's /usr/lib/postgresql/<version>/bin (newest first)."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: float(Path(p).parent.name),
                            reverse=True):
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as_user() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in _RUN_AS:
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as")


@dataclass
class PgServer:
    """One running server; `url_for(db)` connects as the superuser `linkscope` with its password."""

    root: Path
    port: int
    password: str
    bins: Path
    user: str | None

    @staticmethod
    def missing() -> str | None:
        """Why no server can start here (None when one can)."""
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return "psycopg is not installed (pip install 'psycopg[binary]')"
        if bin_dir() is None:
            return "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
        return None

    @classmethod
    def start(cls) -> PgServer:
        """initdb and start a server; the caller stops it."""
        bins = bin_dir()
        assert bins is not None, cls.missing()
        user = _run_as_user()
        root = Path(tempfile.mkdtemp(prefix="linkscope-pg-"))
        server = cls(root, _free_port(), secrets.token_hex(12), bins, user)
        if user is not None:
            os.chown(root, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
        pwfile = root / "pw"
        server._as_user(["sh", "-c", f"umask 077 && printf %s {server.password} > {pwfile}"])
        server._as_user([str(bins / "initdb"), "-D", str(root / "data"), "-U", USER, "--auth=scram-sha-256",
                         f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"])
        os.remove(pwfile)
        server.start_again()
        return server

    def _as_user(self, argv: list[str]) -> None:
        cmd = argv if self.user is None else ["runuser", "-u", self.user, "--", *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {done.stderr.strip() or done.stdout.strip()}")

    def start_again(self) -> None:
        """Start (or restart after `kill`) the server on its port; waits until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_user([str(self.bins / "pg_ctl"), "-D", str(self.root / "data"), "-o", options,
                       "-l", str(self.root / "log"), "-w", "-t", "60", "start"])

    def kill(self) -> None:
        """Stop the server at once, as a crash would (no shutdown checkpoint)."""
        self._as_user([str(self.bins / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"])

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        try:
            self.kill()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url_for(self, database: str, password: str | None = None) -> str:
        """A connection URL for `database` (the real password unless another is given)."""
        return f"postgresql://{USER}:{password or self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new, empty place for a store; returns its URL. A schema of its own in the server's `postgres` database
        (milliseconds, where CREATE DATABASE takes most of a second), chosen through the URL's search_path."""
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url_for("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return self.url_for("postgres") + f"?options=-csearch_path%3D{name}"
