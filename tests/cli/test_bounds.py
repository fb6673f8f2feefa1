"""Every read bounded, every number bounded, every OS error one line: FIFOs and devices given as inputs, integers
past what SQLite or numpy take, names too long for the OS, a full disk while writing an export."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli


def _one_line_error(result, code: int = 2) -> str:  # noqa: ANN001 - typer's Result
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("args", [["runs", "--limit", "99999999999999999999999"],
                                  ["report", "--fleet", "--limit", "99999999999999999999999"],
                                  ["bench", "train", "-m", "llama2-7b", "--layers", "99999999999999999999999"],
                                  ["bench", "train", "-m", "llama2-7b", "--vocab", "99999999999999999999999"],
                                  ["bench", "train", "-m", "llama2-7b", "--seq-len", "-3"]])
def test_integers_past_their_range_are_refused_before_sqlite_or_numpy(tmp_path: Path, args: list[str]) -> None:
    result = run_cli(*args, "--db", str(tmp_path / "r.db"))
    _one_line_error(result)


def test_fifo_and_device_catalogs_are_refused_and_a_fifo_in_the_config_dir_is_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)
    for source in (fifo, Path("/dev/zero")):
        assert "not a regular file" in _one_line_error(run_cli("catalog", "--catalog", str(source)))
    config = tmp_path / "config"
    config.mkdir()
    os.mkfifo(config / "prices.yaml")
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(config))
    with pytest.warns(UserWarning, match="prices.yaml: not a regular file"):
        listed = run_cli("catalog", "--gpu", "H100", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout)


def test_a_name_too_long_for_the_os_is_one_line() -> None:
    result = run_cli("predict", "train", "-s", "aws/p5.48xlarge", "-m", "x" * 10_000)
    output = _one_line_error(result)
    assert len(output.strip().splitlines()) <= 2 and len(output) < 1000


def test_a_full_disk_while_writing_an_export_keeps_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import linkscope.hardware.errors as errors_module

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    db = tmp_path / "r.db"
    monkeypatch.setattr(errors_module.os, "fchmod", full)
    result = run_cli("bench", "-b", "256", "-e", "512", "-n", "1", "-w", "0", "--db", str(db),
                     "-J", str(tmp_path / "r.json"))
    output = _one_line_error(result, 3)
    assert "No space left on device" in output and "stored as run" in output
    monkeypatch.undo()
    runs = json.loads(run_cli("runs", "--json", "--db", str(db)).stdout)
    assert runs and runs[0]["status"] == "complete"
    assert not (tmp_path / "r.json").exists() and not list(tmp_path.glob(".linkscope-*"))
