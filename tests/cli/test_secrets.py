"""A password in a `--db` URL is stored, exported and printed nowhere: a bench run against a real PostgreSQL server
with the password on its command line, then every reading command, grepped for the password."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from linkscope.results.database import redact_text
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli


@pytest.mark.parametrize(("text", "expected"), [
    ("bench --db postgresql://u:S3cr%40t@h:5432/db -n 2", "bench --db postgresql://u:***@h:5432/db -n 2"),
    ("--db=postgres://u:pw@h/db", "--db=postgres://u:***@h/db"),
    ("postgresql://u:p@ss@h/db x@y", "postgresql://u:***@h/db x@y"),
    ("host=h password=abc user=u", "host=h password=*** user=u"),
    ("postgresql://u@h/db --label a@b", "postgresql://u@h/db --label a@b"),
])
def test_redact_text_masks_every_password_and_nothing_else(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_an_sqlite_store_never_holds_a_planted_password(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    secret = "plantedPW123"
    with ResultStore(db) as store:
        run_id = store.create_run(RunInfo(kind="bench", command=f"linkscope bench --db postgresql://u:{secret}@h/d",
                                          config={"run": {"db_path": f"postgresql://u:{secret}@h/d"}}))
        store.update_run(run_id, extra={"note": f"password={secret}"})
    assert secret.encode() not in db.read_bytes()
    for args in (("runs", "show", run_id), ("runs", "--json"), ("export", run_id, "--json")):
        result = run_cli(*args, "--db", str(db))
        assert result.exit_code == 0, result.output
        assert secret not in result.output
    assert "postgresql://u:***@h/d" in run_cli("runs", "show", run_id, "--db", str(db)).output


def test_a_bench_run_on_postgres_leaves_its_password_nowhere(pg_server, pg_url: str, tmp_path: Path,  # noqa: ANN001
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    secret = pg_server.password
    assert secret in pg_url
    args = ["bench", "-b", "256", "-e", "512", "-n", "1", "-w", "0", "--db", pg_url, "-J", str(tmp_path / "r.json"),
            "--csv", str(tmp_path / "r.csv")]
    monkeypatch.setattr(sys, "argv", ["linkscope", *args])
    bench = run_cli(*args)
    assert bench.exit_code == 0, bench.output
    outputs = [bench.output, (tmp_path / "r.json").read_text(), (tmp_path / "r.csv").read_text()]
    run_id = json.loads(run_cli("runs", "--json", "--db", pg_url).stdout)[0]["run_id"]
    for reading in (("runs", "show", run_id), ("runs", "--json"), ("export", run_id, "--json"),
                    ("export", run_id, "--csv"), ("compare", run_id, run_id)):
        result = run_cli(*reading, "--db", pg_url)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    for text in outputs:
        assert secret not in text
    assert "linkscope:***@" in run_cli("runs", "show", run_id, "--db", pg_url).output
    with psycopg.connect(pg_url) as conn:
        stored = [json.dumps(row, default=str) for table in ("runs", "collective_rows")
                  for row in conn.execute(f"SELECT * FROM {table}").fetchall()]
    assert stored and not any(secret in row for row in stored)


def test_the_safer_ways_the_readme_shows_work(pg_server, pg_url: str, tmp_path: Path,  # noqa: ANN001
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """PGPASSWORD, a password file (PGPASSFILE / ~/.pgpass) and a libpq service file: the URL holds no password."""
    secret = pg_server.password
    bare = pg_url.replace(f":{secret}@", "@")
    run_cli("import", "nccl-tests", str(Path(__file__).parent.parent / "fixtures" / "nccl_tests" /
                                        "v2.13_all_reduce_a100_8gpu_oci.txt"), "--db", pg_url)
    monkeypatch.setenv("PGPASSWORD", secret)
    assert run_cli("runs", "--db", bare).exit_code == 0
    monkeypatch.delenv("PGPASSWORD")
    assert run_cli("runs", "--db", bare).exit_code == 2  # no password anywhere: refused, one line
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg_server.port}:*:linkscope:{secret}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    assert run_cli("runs", "--db", bare).exit_code == 0
    service = tmp_path / "pg_service.conf"
    schema = pg_url.rsplit("%3D", 1)[1]
    service.write_text(f"[linkscope]\nhost=127.0.0.1\nport={pg_server.port}\nuser=linkscope\ndbname=postgres\n"
                       f"options=-csearch_path={schema}\n")
    monkeypatch.setenv("PGSERVICEFILE", str(service))
    listed = run_cli("runs", "--json", "--db", "postgresql://?service=linkscope")
    assert listed.exit_code == 0, listed.output
    assert len(json.loads(listed.stdout)) == 1
