"""The real-log corpus (tests/fixtures/corpus, sources in its README): every nccl-tests and rccl-tests output read
right, and each misread once made on such logs fixed: a test that died midway, several runs in one file, repeated
sizes, a row an NCCL line split, footers the file never had, one average over several collectives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.results.nccltests import import_nccl_tests_file, parse_nccl_tests_file
from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli

FIXTURES = Path(__file__).parents[2] / "fixtures"
CORPUS = FIXTURES / "corpus" / "nccl_tests"
OLDER = FIXTURES / "nccl_tests"

# file: (op and rank count of each run, rows, hosts, library, NCCL/RCCL version, failure lines)
EXPECTED = {
    "abci_a100_4x8_ib_nccl2.8.txt": ([("all_reduce", 32)], 48, 4, "nccl", None, 0),
    "superbench_a100_all_reduce_8gpu.log": ([("all_reduce", 8)], 68, 1, "nccl", None, 0),
    "nccl_1039_v100_pcie_4gpu_rows.txt": ([("all_reduce", 4)], 8, 1, "nccl", None, 0),
    "nccl_tests_2.20_gb10_2nodes_cut.txt": ([("all_reduce", 2)], 8, 2, "nccl", None, 0),
    "nccl_tests_280_unindented_rows_and_failure.txt": ([("unknown", 3)], 6, 1, "nccl", None, 2),
    "nccl_tests_322_failure_midway.txt": ([("all_reduce", 0)], 10, 0, "nccl", None, 8),
    "rccl_2075_broadcast_rows_then_next_test.txt": ([("broadcast", 0)], 20, 0, "nccl", None, 0),
    "rccl_tests_mi300x_8gpu_aac8.txt": ([("all_reduce", 8)], 62, 1, "rccl", None, 0),
    "rccl_tests_mi300x_2x8_aac10.txt": ([("all_reduce", 16)], 64, 2, "rccl", "2.22.3-HEAD:7d8d67c", 0),
    "rccl_tests_mi355x_2x8_anp_no_footer.txt": ([("all_reduce", 16)], 62, 2, "rccl", "2.26.6-HEAD:6ade506", 0),
    "rccl_tests_mi325x_egrep_1_2_4_8_nodes.txt": ([("all_reduce", 0)] * 4, 24, 0, "nccl", None, 0),
    "nccl_tests_219_failure_before_rows.txt": ([], 0, 2, "nccl", None, 2),
    "nccl_583_markdown_lost_hashes.txt": ([], 0, 1, "nccl", None, 0),
    "nccl_tests_249_g5_blocking_lost_hashes.txt": ([], 0, 1, "nccl", None, 0),
    "nccl_tests_107_two_single_rank_runs_interleaved.txt": ([], 0, 2, "nccl", None, 0),
    "nccl_tests_36_nccl2.5_ib_interleaved_cut.txt": ([], 0, 2, "nccl", "2.5.6+cuda10.0", 0),
}


def test_every_corpus_output_has_an_expectation() -> None:
    assert {p.name for p in CORPUS.iterdir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_output_is_read_right(name: str) -> None:
    runs, rows, hosts, library, version, failures = EXPECTED[name]
    parsed = parse_nccl_tests_file(CORPUS / name)
    assert [(s.op, s.world_size) for s in parsed.sections if s.rows] == runs
    assert (len(parsed.rows), len(parsed.hosts), parsed.library, parsed.nccl_version) == (rows, hosts, library, version)
    assert len(parsed.failures) == failures
    assert not [p for p in parsed.problems if p.invalid]


def test_headers_markdown_stripped_of_their_hash_are_still_read() -> None:
    parsed = parse_nccl_tests_file(CORPUS / "nccl_583_markdown_lost_hashes.txt")
    assert parsed.world_size == 8 and parsed.hosts == ["AI-A100-Beethoven01"]
    assert parsed.sections[0].config["ngpus"] == 1


def test_two_processes_claiming_rank_0_are_named() -> None:
    parsed = parse_nccl_tests_file(CORPUS / "nccl_tests_107_two_single_rank_runs_interleaved.txt")
    assert any("rank 0 is listed twice" in p.message for p in parsed.problems)


@pytest.fixture
def store(tmp_path: Path):  # noqa: ANN201 - a ResultStore
    with ResultStore(tmp_path / "r.db") as s:
        yield s


def test_a_test_that_fails_midway_is_stored_as_failed_with_its_error_line(store: ResultStore) -> None:
    result = import_nccl_tests_file(CORPUS / "nccl_tests_322_failure_midway.txt", store, "hca")
    info = store.get_run(result.run_id)
    assert info.status == "failed" and info.error is not None
    assert info.error.startswith("line 7: HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error")
    assert len(store.rows(result.run_id)) == 10  # the rows measured before it died are kept


def test_a_test_that_failed_before_any_row_is_refused_with_its_error(store: ResultStore) -> None:
    with pytest.raises(UserError, match="failed before printing any result .*Test NCCL failure common.cu:959"):
        import_nccl_tests_file(CORPUS / "nccl_tests_219_failure_before_rows.txt", store, "x")


def test_several_runs_in_one_file_are_refused_naming_where_each_starts(store: ResultStore) -> None:
    # An egrep of the 1, 2, 4 and 8-node runs: their headers are gone, so the runs cannot be told apart.
    path = CORPUS / "rccl_tests_mi325x_egrep_1_2_4_8_nodes.txt"
    with pytest.raises(UserError, match=r"4 runs of all_reduce .*lines 4, 8, 12, 16\); split it"):
        import_nccl_tests_file(path, store, "x")
    assert store.list_runs() == []
    parsed = parse_nccl_tests_file(path)
    assert any("another run starts here" in p.message and p.line == 8 for p in parsed.problems)


def test_repeated_sizes_warn_but_nccl_tests_zero_byte_repeats_do_not() -> None:
    quiet = parse_nccl_tests_file(CORPUS / "superbench_a100_all_reduce_8gpu.log")
    assert not any("printed again" in p.message for p in quiet.problems)  # 0 B twice: nccl-tests' own rounding
    text = (CORPUS / "superbench_a100_all_reduce_8gpu.log").read_text().splitlines()
    row = next(i for i, line in enumerate(text) if line.lstrip().startswith("1024 "))
    doubled = "\n".join(text[: row + 1] + [text[row]] + text[row + 1:])
    from linkscope.results.nccltests import parse_nccl_tests_text

    parsed = parse_nccl_tests_text(doubled, "doubled")
    assert any(p.message == f"size 1024 printed again (first at line {row + 1})" for p in parsed.problems)


def test_a_row_split_by_an_nccl_line_is_read_as_one_and_said(store: ResultStore) -> None:
    parsed = parse_nccl_tests_file(OLDER / "derived_split_row_superbench.log")
    whole = parse_nccl_tests_file(CORPUS / "superbench_a100_all_reduce_8gpu.log")
    assert [(r.size_bytes, r.time_us, r.busbw) for r in parsed.rows] == \
        [(r.size_bytes, r.time_us, r.busbw) for r in whole.rows]
    assert [p.message for p in parsed.problems] == ["row split by an NCCL line (lines 19 and 20); read as one row"]


def test_runs_show_prints_only_the_footer_the_file_had(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    run_id = run_cli("import", "nccl-tests", str(CORPUS / "superbench_a100_all_reduce_8gpu.log"),
                     "--db", db).stdout.split("imported run ")[1].split(":")[0]
    shown = run_cli("runs", "show", run_id, "--db", db).stdout
    assert "# Avg bus bandwidth    : 68.4048" in shown  # the file's figure, not one recomputed from rounded rows
    assert "Collective test concluded" not in shown
    cut = run_cli("import", "nccl-tests", str(CORPUS / "nccl_tests_2.20_gb10_2nodes_cut.txt"), "--db", db)
    cut_id = cut.stdout.split("imported run ")[1].split(":")[0]
    shown = run_cli("runs", "show", cut_id, "--db", db).stdout
    assert "Out of bounds" not in shown and "Avg bus bandwidth" not in shown


def test_json_averages_are_per_collective(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    out = run_cli("import", "nccl-tests", str(OLDER / "concatenated_2080ti_2gpu.txt"), "--db", db).stdout
    run_id = out.split("imported run ")[1].split(":")[0]
    doc = json.loads(run_cli("runs", "show", run_id, "--json", "--db", db).stdout)
    assert doc["average_bus_bandwidth"]["bandwidth"] is None
    by = doc["average_bus_bandwidth"]["by_collective"]
    assert {"all_reduce", "all_gather", "reduce@2ranks", "reduce@1ranks", "all_to_all"} <= set(by)
    assert doc["linkscope"]["avg_busbw_by_op"] == by


def test_rccl_tests_output_is_stored_as_rccl(store: ResultStore) -> None:
    result = import_nccl_tests_file(CORPUS / "rccl_tests_mi300x_2x8_aac10.txt", store, "mi300x")
    info = store.get_run(result.run_id)
    assert info.backend == "rccl-tests" and info.versions == {"rccl-tests": "develop:448c4c7",
                                                               "rccl": "2.22.3-HEAD:7d8d67c"}
    assert info.nodes == 2 and info.world_size == 16
