"""Capturing NCCL's INFO output in files during nccl runs, and keeping it with the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from linkscope.bench import nccl_capture
from tests.conftest import FIXTURES


def test_capture_only_on_nccl_and_never_over_the_users_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    assert nccl_capture.wants_capture("nccl")
    assert not nccl_capture.wants_capture("gloo")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    assert not nccl_capture.wants_capture("nccl")


def test_capture_sets_per_process_files_and_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.delenv("NCCL_DEBUG_FILE", raising=False)
    with nccl_capture.capture("nccl") as log_dir:
        assert log_dir is not None
        assert os.environ["NCCL_DEBUG"] == "INFO"
        assert os.environ["NCCL_DEBUG_FILE"] == str(log_dir / "nccl.%h.%p.log")
    assert "NCCL_DEBUG" not in os.environ and "NCCL_DEBUG_FILE" not in os.environ
    with nccl_capture.capture("gloo") as none:
        assert none is None


def test_read_logs_by_process_and_remove(tmp_path: Path) -> None:
    (tmp_path / "nccl.node1.100.log").write_text("a")
    (tmp_path / "nccl.node1.200.log").write_text("b")
    assert nccl_capture.read_logs(tmp_path) == {"nccl.node1.100.log": "a", "nccl.node1.200.log": "b"}
    assert nccl_capture.read_logs(tmp_path, pid=200, remove=True) == {"nccl.node1.200.log": "b"}
    assert not (tmp_path / "nccl.node1.200.log").exists()


def test_stored_log_carries_the_transport_analysis() -> None:
    text = (FIXTURES / "probe" / "nccl_2node_socket_fallback.log").read_text()
    extra = nccl_capture.log_extra({"nccl.a.1.log": text})
    assert extra["files"] == {"nccl.a.1.log": text}
    assert "analysis" in extra and extra["analysis"]["nccl_lines"] > 0
