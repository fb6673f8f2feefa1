"""Labels, hostnames and other strings from users and logs are printed with control characters escaped, in every
table and plain line; JSON keeps them exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.report.printable import printable, printable_line
from tests.cli.helpers import run_cli
from tests.conftest import FIXTURES

HOST = "evil\x1b]0;pwn\x07host"
LABEL = "lab\x1b[2Jel\u202e\x9b"


def test_printable_escapes_controls_and_keeps_text() -> None:
    assert printable(LABEL) == "lab\\x1b[2Jel\\u202e\\x9b"
    assert printable("a\tb\nc é 中") == "a\tb\nc é 中"
    assert printable_line("a\tb\nc") == "a\\tb\\nc"


@pytest.fixture
def evil_run(tmp_path: Path) -> tuple[str, str]:
    log = tmp_path / "evil.txt"
    text = (FIXTURES / "nccl_tests" / "v2.13_all_reduce_a100_8gpu_oci.txt").read_text()
    log.write_text(text.replace("inst-ks8ls-comp", HOST))
    db = str(tmp_path / "r.db")
    imported = run_cli("import", "nccl-tests", str(log), "--db", db, "--label", LABEL)
    assert imported.exit_code == 0, imported.output
    return db, json.loads(run_cli("runs", "--json", "--db", db).stdout)[0]["run_id"]


def test_tables_and_lines_escape_what_logs_and_users_gave(evil_run: tuple[str, str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    db, run_id = evil_run
    for columns in ("80", "200"):
        monkeypatch.setenv("COLUMNS", columns)
        for args in (("runs",), ("runs", "show", run_id), ("compare", run_id, run_id), ("runs", "--kind", "import")):
            result = run_cli(*args, "--db", db)
            assert result.exit_code == 0, result.output
            assert "\x1b" not in result.output and "\x07" not in result.output and "\u202e" not in result.output
            assert "\\x1b" in result.output, (args, result.output)
    shown = run_cli("runs", "show", run_id, "--db", db).output
    assert "evil\\x1b]0;pwn\\x07host" in shown


def test_json_keeps_the_strings_exact(evil_run: tuple[str, str]) -> None:
    db, run_id = evil_run
    data = json.loads(run_cli("export", run_id, "--json", "--db", db).stdout)
    assert data["linkscope"]["label"] == LABEL
    listed = json.loads(run_cli("runs", "--json", "--db", db).stdout)
    assert listed[0]["label"] == LABEL
