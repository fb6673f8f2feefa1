"""`linkscope runs`, `runs show`, `export` and `import nccl-tests`, run in-process on a fresh app."""

from __future__ import annotations

import json
import re

import pytest
import typer
from typer.testing import CliRunner

from linkscope.cli import runs_cmd
from linkscope.results.store import ResultStore
from tests.results.helpers import CONCATENATED, MALFORMED, V2_13, V2_13_JSON


@pytest.fixture
def cli():
    app = typer.Typer()
    runs_cmd.register(app)

    def invoke(*args: str):
        return CliRunner(env={"COLUMNS": "200"}).invoke(app, list(args), catch_exceptions=False)

    return invoke


def imported_id(output: str) -> str:
    match = re.search(r"imported run ([0-9a-f]{8})", output)
    assert match, output
    return match.group(1)


def test_import_prints_id_and_counts(cli, tmp_path):
    db = str(tmp_path / "runs.db")
    result = cli("import", "nccl-tests", str(CONCATENATED), "--label", "autodl", "--db", db)
    assert result.exit_code == 0, result.output
    assert "336 rows from 6 section(s) (all_reduce, all_gather, broadcast, reduce, all_to_all)" in result.stdout
    with ResultStore(tmp_path / "runs.db") as store:
        assert store.get_run(imported_id(result.stdout)).label == "autodl"


def test_import_lists_problems_as_warnings(cli):
    result = cli("import", "nccl-tests", str(MALFORMED))  # --db defaults to $LINKSCOPE_DB
    assert result.exit_code == 0
    assert "4 warning(s)" in result.stdout
    assert "warning:" in result.stderr and "line 41: time '12x.9' is not a number" in result.stderr
    with ResultStore() as store:
        assert store.list_runs()[0].label == "malformed_from_v2.13"


def test_import_of_a_file_without_rows_is_one_line_and_exit_2(cli, tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("nothing here\n")
    result = cli("import", "nccl-tests", str(junk))
    assert result.exit_code == 2
    assert "no nccl-tests result rows" in result.stderr and "Traceback" not in result.output


def test_runs_lists_newest_first_and_filters(cli):
    first = imported_id(cli("import", "nccl-tests", str(V2_13), "--label", "a").stdout)
    second = imported_id(cli("import", "nccl-tests", str(V2_13_JSON), "--label", "b").stdout)
    table = cli("runs")
    assert table.exit_code == 0 and first in table.stdout and second in table.stdout
    listed = json.loads(cli("runs", "--json").stdout)
    assert {r["run_id"] for r in listed} == {first, second}
    assert [r["run_id"] for r in json.loads(cli("runs", "--label", "b", "--json").stdout)] == [second]
    assert json.loads(cli("runs", "--kind", "bench", "--json").stdout) == []
    assert len(json.loads(cli("runs", "--limit", "1", "--json").stdout)) == 1


def test_runs_on_an_empty_store(cli):
    import os

    ResultStore(os.environ["LINKSCOPE_DB"]).close()  # an existing store with nothing in it
    result = cli("runs")
    assert result.exit_code == 0 and "No runs stored yet" in result.stdout


def test_a_missing_store_in_the_environment_is_refused_as_db_refuses_it(cli):
    import os

    result = cli("runs")  # $LINKSCOPE_DB names a file that does not exist: one rule for it and --db
    assert result.exit_code == 2 and "no results database there" in result.stderr
    assert not os.path.exists(os.environ["LINKSCOPE_DB"])


def test_show_prints_metadata_and_the_nccl_tests_table(cli):
    run_id = imported_id(cli("import", "nccl-tests", str(V2_13), "--label", "h100").stdout)
    result = cli("runs", "show", run_id[:6])
    assert result.exit_code == 0
    assert "ztan-mig-235z, ztan-mig-gq73" in result.stdout
    assert "#       size         count      type   redop    root" in result.stdout
    assert "  8589934592    2147483648     float     sum      -1  47535.0  180.71  338.82" in result.stdout
    # The file's own footer, as printed; no line the file did not have.
    assert "# Avg bus bandwidth    : 70.742" in result.stdout and "Collective test concluded" not in result.stdout
    doc = json.loads(cli("runs", "show", run_id, "--json").stdout)
    assert doc["linkscope"]["run_id"] == run_id and len(doc["results"]) == 31


def test_show_unknown_id_is_exit_2(cli):
    import os

    ResultStore(os.environ["LINKSCOPE_DB"]).close()
    result = cli("runs", "show", "ffffffff")
    assert result.exit_code == 2 and "no run 'ffffffff'" in result.stderr


def test_export_json_and_csv(cli, tmp_path):
    run_id = imported_id(cli("import", "nccl-tests", str(V2_13)).stdout)
    doc = json.loads(cli("export", run_id, "--json").stdout)
    assert doc["results"][0]["root"] == "    -1" and doc["linkscope"]["hosts"][0] == "ztan-mig-235z"
    out = tmp_path / "run.csv"
    result = cli("export", run_id, "--csv", "-o", str(out))
    assert result.exit_code == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("op,size_bytes,count") and len(lines) == 63
    assert json.loads(cli("export", run_id, "--json", "-o", str(tmp_path / "r.json")).stdout or "null") is None
    assert json.loads((tmp_path / "r.json").read_text())["linkscope"]["run_id"] == run_id


@pytest.mark.parametrize("flags", [[], ["--json", "--csv"]])
def test_export_needs_exactly_one_format(cli, flags):
    run_id = imported_id(cli("import", "nccl-tests", str(V2_13)).stdout)
    result = cli("export", run_id, *flags)
    assert result.exit_code == 2 and "choose one format" in result.stderr


def test_corrupt_database_is_exit_2_naming_the_file(cli, tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite at all " * 100)
    result = cli("runs", "--db", str(bad))
    assert result.exit_code == 2 and "bad.db" in result.stderr


def test_reading_commands_refuse_a_missing_db_instead_of_creating_it(cli, tmp_path):
    typo = tmp_path / "typo.db"
    for args in (["runs"], ["runs", "show", "abc"], ["export", "abc", "--json"]):
        result = cli(*args, "--db", str(typo))
        assert result.exit_code == 2, args
        assert "no results database" in result.stderr and "Traceback" not in result.output
    assert not typo.exists()


def test_import_refuses_a_missing_directory(cli, tmp_path):
    result = cli("import", "nccl-tests", str(V2_13), "--db", str(tmp_path / "no" / "r.db"))
    assert result.exit_code == 2 and "does not exist" in result.stderr
    assert not (tmp_path / "no").exists()


def test_importing_the_same_file_twice_keeps_one_run(cli, tmp_path):
    db = str(tmp_path / "r.db")
    first = imported_id(cli("import", "nccl-tests", str(V2_13), "--db", db).stdout)
    again = cli("import", "nccl-tests", str(V2_13), "--db", db)
    assert again.exit_code == 0 and f"already imported as run {first}" in again.stdout
    with ResultStore(tmp_path / "r.db") as store:
        assert [r.run_id for r in store.list_runs()] == [first]


def _with_row(tmp_path, old: str, new: str):
    text = V2_13.read_text()
    assert old in text
    bad = tmp_path / "bad.txt"
    bad.write_text(text.replace(old, new, 1))
    return bad


@pytest.mark.parametrize(
    ("field", "replacement", "message"),
    [
        ("size", "12345678901234567890123", "size 12345678901234567890123 bytes is out of range"),
        ("type", "banana", "unknown data type 'banana'"),
        ("time", "0.00", "time 0 us is not positive"),
        ("time", "-5.00", "time -5 us is not positive"),
        ("size", "-8", "size -8 bytes is out of range"),
    ],
)
def test_an_impossible_row_refuses_the_import_naming_the_line(cli, tmp_path, field, replacement, message):
    lines = V2_13.read_text().splitlines()
    number, line = next((i + 1, text) for i, text in enumerate(lines) if text.split() and text.split()[0].isdigit()
                        and len(text.split()) > 10)
    tokens = line.split()
    index = {"size": 0, "type": 2, "time": 5}[field]
    old = tokens[index]
    new_line = line.replace(f" {old} ", f" {replacement} ", 1) if index else line.replace(old, replacement, 1)
    bad = _with_row(tmp_path, line, new_line)
    db = tmp_path / "r.db"
    result = cli("import", "nccl-tests", str(bad), "--db", str(db))
    assert result.exit_code == 2, result.output
    assert f"line {number}: {message}" in result.stderr and "nothing imported" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    with ResultStore(db) as store:
        assert store.list_runs() == []


def test_calibrate_refuses_a_missing_db(tmp_path):
    from linkscope.cli import calibrate_cmd

    app = typer.Typer()
    calibrate_cmd.register(app)
    result = CliRunner().invoke(app, ["calibrate", "abc", "--db", str(tmp_path / "typo.db")])
    assert result.exit_code == 2 and "no results database" in result.output
    assert not (tmp_path / "typo.db").exists()
