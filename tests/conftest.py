"""Shared test set-up: keep every test away from the user's real config and data directories."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("LINKSCOPE_DB", str(home / "runs.db"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg-cache"))


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def pg_server():  # noqa: ANN201 - tests.pg_server.PgServer
    """One PostgreSQL server for the whole session (started on first use, stopped at the end); skipped with the
    reason when the server binaries or psycopg are missing."""
    from tests.pg_server import PgServer

    reason = PgServer.missing()
    if reason is not None:
        pytest.skip(reason)
    server = PgServer.start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:  # noqa: ANN001
    """A fresh, empty database on the session's server."""
    return str(pg_server.create_database())
