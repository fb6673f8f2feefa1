"""`import_nccl_tests`: format detection, the stored run's metadata and rows, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.results.nccltests import import_nccl_tests, import_nccl_tests_file
from linkscope.results.store import ResultStore
from tests.results.helpers import CONCATENATED, MALFORMED, PRE_2_13, V2_13, V2_13_JSON, V2_17_CUT


@pytest.fixture
def store(tmp_path):
    with ResultStore(tmp_path / "runs.db") as s:
        yield s


def test_import_text_stores_run_and_rows(store):
    run_id = import_nccl_tests(V2_13, store, label="h100-pair")
    info = store.get_run(run_id)
    assert (info.kind, info.label, info.backend, info.status) == ("import", "h100-pair", "nccl-tests", "complete")
    assert info.hosts == ["ztan-mig-235z", "ztan-mig-gq73"] and info.world_size == 16 and info.nodes == 2
    assert info.ended_at is not None and info.extra["source_format"] == "text"
    assert info.extra["sections"][0]["avg_busbw"] == 70.742
    assert len(info.groups["ranks"]) == 16
    assert len(store.rows(run_id)) == 62 and store.rows(run_id, op="all_gather") == []


def test_import_records_versions(store):
    info = store.get_run(import_nccl_tests(V2_17_CUT, store, label="gb10"))
    assert info.versions == {"nccl-tests": "2.17.6", "nccl": "2.28.3"}
    info = store.get_run(import_nccl_tests(PRE_2_13, store, label="a10g"))
    assert info.versions == {"nccl": "2.11.4+cuda11.4"}


def test_import_detects_json(store):
    result = import_nccl_tests_file(V2_13_JSON, store, label="json")
    assert result.parsed.format == "json"
    assert store.rows(result.run_id) == import_text_rows(store)


def import_text_rows(store):
    return store.rows(import_nccl_tests(V2_13, store, label="text"))


def test_import_with_problems_is_incomplete_and_keeps_them(store):
    result = import_nccl_tests_file(MALFORMED, store, label="bad")
    info = store.get_run(result.run_id)
    assert info.status == "incomplete" and len(store.rows(result.run_id)) == 52
    assert info.extra["problems"][1].startswith("line 39:")


def test_import_concatenated_file(store):
    result = import_nccl_tests_file(CONCATENATED, store, label="autodl")
    ops = {r.op for r in store.rows(result.run_id)}
    assert ops == {"all_reduce", "all_gather", "broadcast", "reduce", "all_to_all"}
    assert store.list_runs()[0].ops == sorted(ops)


def test_import_file_without_rows_is_a_user_error(store, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("NCCL INFO nothing measured\n")
    with pytest.raises(UserError, match="no nccl-tests result rows"):
        import_nccl_tests(empty, store, label="x")
    assert store.list_runs() == []


def test_import_missing_file_and_broken_json(store, tmp_path):
    with pytest.raises(UserError, match="no such file"):
        import_nccl_tests(tmp_path / "missing.txt", store, label="x")
    broken = tmp_path / "cut.json"
    broken.write_text(V2_13_JSON.read_text()[:500])
    with pytest.raises(UserError, match=r"cut\.json: not valid JSON \(line 1"):
        import_nccl_tests(broken, store, label="x")


def test_json_nested_thousands_deep_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    from linkscope.results.nccltests import parse_nccl_tests_file

    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(UserError, match="nested too deeply"):
        parse_nccl_tests_file(path)


def test_concurrent_imports_of_one_file_store_it_once(tmp_path: Path) -> None:
    import threading

    db = tmp_path / "r.db"
    ResultStore(db).close()  # the schema first, so the writers race on the import alone
    start = threading.Barrier(8)
    results: list[tuple[str, bool]] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            with ResultStore(db) as store:
                start.wait()
                imported = import_nccl_tests_file(V2_13, store, "")
                results.append((imported.run_id, imported.already_imported))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len({run_id for run_id, _ in results}) == 1
    assert sorted(already for _, already in results) == [False] + [True] * 7
    with ResultStore(db) as store:
        assert len(store.list_runs()) == 1
