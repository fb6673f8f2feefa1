"""Files linkscope writes: renamed into place only over a regular file or a new path; a device, FIFO or directory
as the target is refused in one line before any work (a character device made with mknod in a private directory
stays a character device); Prometheus textfiles are 0644; OS failures are one line."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError, output_mode, write_output
from tests.cli.helpers import run_cli
from tests.conftest import FIXTURES

OCI = FIXTURES / "nccl_tests" / "v2.13_all_reduce_a100_8gpu_oci.txt"


@pytest.fixture
def stored(tmp_path: Path) -> tuple[str, str]:
    """A store holding one imported run: (db path, run id)."""
    db = str(tmp_path / "r.db")
    assert run_cli("import", "nccl-tests", str(OCI), "--db", db).exit_code == 0
    listed = run_cli("runs", "--db", db, "--json")
    return db, __import__("json").loads(listed.stdout)[0]["run_id"]


def _char_device(tmp_path: Path) -> Path:
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the numbers of /dev/null, in a private directory
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD)")
    return node


def _targets(db: str, run_id: str, target: str) -> list[list[str]]:
    return [["export", run_id, "--prometheus", target, "--db", db],
            ["export", run_id, "--csv", "-o", target, "--db", db],
            ["report", run_id, "-o", target, "--db", db],
            ["catalog", "--html", target],
            ["check", "--quick", "--prometheus", target, "--db", db],
            ["check", "--quick", "--junit", target, "--db", db],
            ["bench", "-e", "1K", "-J", target, "--db", db],
            ["bench", "-e", "1K", "--csv", target, "--db", db]]


def test_a_character_device_target_is_refused_and_left_a_device(tmp_path: Path, stored: tuple[str, str]) -> None:
    device = _char_device(tmp_path)
    for args in _targets(*stored, str(device)):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "not a regular file" in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert stat.S_ISCHR(device.stat().st_mode), args


def test_fifo_and_directory_targets_are_refused_without_blocking(tmp_path: Path, stored: tuple[str, str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target, words in ((fifo, "not a regular file"), (tmp_path, "is a directory")):
        for args in _targets(*stored, str(target)):
            result = run_cli(*args)
            assert result.exit_code == 2, (args, result.output)
            assert words in result.output, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_prometheus_textfiles_are_0644_and_replace_a_regular_file(tmp_path: Path, stored: tuple[str, str]) -> None:
    db, run_id = stored
    target = tmp_path / "linkscope.prom"
    target.write_text("old\n")
    target.chmod(0o600)
    assert run_cli("export", run_id, "--prometheus", str(target), "--db", db).exit_code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_text().startswith("# HELP")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_other_outputs_follow_the_umask(tmp_path: Path, stored: tuple[str, str]) -> None:
    db, run_id = stored
    out = tmp_path / "r.csv"
    assert run_cli("export", run_id, "--csv", "-o", str(out), "--db", db).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == output_mode()


def test_os_failures_are_one_line_naming_the_option(tmp_path: Path, stored: tuple[str, str]) -> None:
    db, run_id = stored
    long_name = str(tmp_path / ("x" * 300 + ".csv"))
    result = run_cli("export", run_id, "--csv", "-o", long_name, "--db", db)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(UserError, match="--csv .*cannot be written"):
        write_output(tmp_path / "missing" / "r.csv", "x", "--csv")
