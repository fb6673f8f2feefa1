"""Options are checked even where they would not be used, NaN and out-of-range values refused everywhere, unknown
URL schemes refused, `LINKSCOPE_DB` and `--db` follow one rule, and a foreign database is left exactly as found."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli
from tests.conftest import FIXTURES

OCI = FIXTURES / "nccl_tests" / "v2.13_all_reduce_a100_8gpu_oci.txt"


def _refused(result, *words: str) -> None:  # noqa: ANN001 - typer's Result
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.output, result.output


@pytest.mark.parametrize(("args", "words"), [
    (["predict", "train", "-s", "aws/p5.48xlarge", "-m", "llama2-7b", "--lora-rank", "-1"], ["--lora-rank", "--peft"]),
    (["predict", "train", "-s", "aws/p5.48xlarge", "-m", "llama2-7b", "--base-precision", "nf4"], ["--peft"]),
    (["check", "--quick", "--drop-pct", "nan"], ["--drop-pct", "nan"]),
    (["check", "--quick", "--drop-pct", "-5"], ["--drop-pct"]),
    (["check", "--quick", "--rounds", "-1"], ["--rounds"]),
    (["advise", "train", "-m", "llama2-7b", "--tokens", "1e9", "--budget", "1e308"], ["--budget"]),
    (["predict", "infer", "-s", "aws/g5.12xlarge", "-m", "llama2-7b", "--precision", "fp8"], ["FP8", "A10G"]),
    (["demo", "--nproc", "0"], ["--nproc"]),
    (["demo", "--max-bytes", "abc"], ["--max-bytes"]),
])
def test_bad_values_are_refused_even_where_unused(tmp_path: Path, args: list[str], words: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LINKSCOPE_DB", str(tmp_path / "r.db"))
    _refused(run_cli(*args), *words)
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "report.html").exists()  # nothing ran


@pytest.mark.parametrize("command", [["runs"], ["import", "nccl-tests", str(OCI)]])
def test_unknown_url_schemes_are_refused_by_db_and_the_environment(tmp_path: Path, command: list[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(run_cli(*command, "--db", "mysql://u@h/db"), "mysql://")
    monkeypatch.setenv("LINKSCOPE_DB", "sqlite://x/y.db")
    _refused(run_cli(*command), "LINKSCOPE_DB", "sqlite://")
    assert list(tmp_path.iterdir()) == []  # no `mysql:` directory, no file


def test_linkscope_db_and_db_follow_one_rule_for_a_missing_store(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nope.db"
    by_option = run_cli("runs", "--db", str(missing))
    monkeypatch.setenv("LINKSCOPE_DB", str(missing))
    by_environment = run_cli("runs")
    _refused(by_option, "no results database there")
    _refused(by_environment, "no results database there")
    assert not missing.exists()


def test_a_foreign_sqlite_file_is_refused_exactly_as_found(tmp_path: Path) -> None:
    foreign = tmp_path / "theirs.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    before = hashlib.sha256(foreign.read_bytes()).hexdigest()
    for args in (["import", "nccl-tests", str(OCI)], ["runs"], ["bench", "-e", "1K"]):
        _refused(run_cli(*args, "--db", str(foreign)), "linkscope results")
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]  # no -wal, no -shm


def test_a_user_catalog_price_beyond_any_rentable_unit_is_refused(tmp_path: Path) -> None:
    catalog = tmp_path / "mine.yaml"
    catalog.write_text("offerings:\n- id: me/big\n  provider: me\n  instance: big\n  gpu: H100\n  gpus: 8\n"
                       "  scale_up: {kind: nvswitch}\n  price_per_hour: 1e300\n  price_as_of: 2026-01-01\n"
                       "  source: test\n  as_of: 2026-01-01\n")
    _refused(run_cli("catalog", "--catalog", str(catalog)), "price_per_hour", "100000")
