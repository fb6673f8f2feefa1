"""Runs left `running` by a launcher that no longer exists, and paths that must already exist."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore, pid_alive, require_existing


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_run_whose_launcher_is_gone_is_marked_incomplete_on_open(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with ResultStore(db) as store:
        gone = store.create_run(RunInfo(kind="bench", launcher_pid=_dead_pid()))
        mine = store.create_run(RunInfo(kind="bench"))
        elsewhere = store.create_run(RunInfo(kind="bench", launcher_pid=_dead_pid(), launcher_host="other-host"))
    with ResultStore(db) as store:
        run = store.get_run(gone)
        assert run.status == "incomplete" and "launcher gone" in (run.error or "") and run.ended_at
        assert store.get_run(mine).status == "running"  # this process is alive
        assert store.get_run(elsewhere).status == "running"  # cannot check another host


def test_a_new_run_records_its_launcher(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.db") as store:
        run = store.get_run(store.create_run(RunInfo(kind="bench")))
    assert run.launcher_host == socket.gethostname() and run.launcher_pid is not None and pid_alive(run.launcher_pid)


def test_read_only_commands_need_an_existing_database(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no results database"):
        require_existing(tmp_path / "typo.db")
    assert not (tmp_path / "typo.db").exists()
    ResultStore(tmp_path / "r.db").close()
    assert require_existing(tmp_path / "r.db").path == tmp_path / "r.db"


def test_a_missing_directory_is_refused_not_created(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        ResultStore(tmp_path / "no" / "dir" / "r.db")
    assert not (tmp_path / "no").exists()
