"""`linkscope check --from FILE|RUN_ID --expect SYSTEM`: recorded outputs judged with the live check's items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures"
H100_440 = FIXTURES / "nccl_tests" / "derived_h100_8gpu_16g_440.txt"
H100_470 = FIXTURES / "nccl_tests" / "derived_h100_8gpu_16g_470.txt"
CORPUS = FIXTURES / "corpus" / "nccl_tests"
ND_H100 = "azure/Standard_ND96isr_H100_v5"


def _check(tmp_path: Path, *args: str):  # noqa: ANN202 - the CLI result
    return run_cli("check", "--db", str(tmp_path / "r.db"), *args)


def test_done_when_440_fails_470_passes_and_a_mi300x_at_316_passes(tmp_path: Path) -> None:
    junit = tmp_path / "c.xml"
    failed = _check(tmp_path, "--from", str(H100_440), "--expect", ND_H100, "--junit", str(junit))
    assert failed.exit_code == 1 and "FAIL all_reduce.busbw@17179869184B" in failed.stdout
    assert "Azure's health-check floor 460 GB/s" in failed.stdout and "verdict: FAIL" in failed.stdout
    assert "<failure" in junit.read_text() and "460" in junit.read_text()
    passed = _check(tmp_path, "--from", str(H100_470), "--expect", ND_H100, "--json")
    doc = json.loads(passed.stdout)
    assert passed.exit_code == 0 and doc["verdict"] == "PASS"
    item = next(i for i in doc["items"] if i["name"].startswith("all_reduce.busbw"))
    assert item["limits"]["floor_gb_per_s"] == 460.0 and item["limits"]["model_gb_per_s"] > 450
    mi300x = _check(tmp_path, "--from", str(CORPUS / "rccl_tests_mi300x_8gpu_aac8.txt"), "--expect",
                    "azure/Standard_ND96isr_MI300X_v5", "--json")
    busbw = next(i for i in json.loads(mi300x.stdout)["items"] if i["name"].startswith("all_reduce.busbw"))
    assert busbw["status"] == "PASS" and busbw["measured"] == pytest.approx(315.8, abs=0.01)


def test_what_a_log_cannot_show_is_skip_and_the_check_is_stored(tmp_path: Path) -> None:
    result = _check(tmp_path, "--from", str(H100_470), "--expect", ND_H100, "--json")
    doc = json.loads(result.stdout)
    by_name = {i["name"]: i for i in doc["items"]}
    for name in ("nvlink.links", "gpus.memory", "topology.kind", "p2p.bandwidth", "scale_out.ports"):
        assert by_name[name]["status"] == "SKIP" and by_name[name]["fix"], name
    assert by_name["gpus.count"]["status"] == "PASS" and by_name["gpus.model"]["measured"] == "H100-SXM5-80GB"
    assert by_name["transport"]["status"] == "SKIP" and "NCCL INFO" in by_name["transport"]["fix"]
    shown = run_cli("runs", "show", doc["run_id"], "--db", str(tmp_path / "r.db"))
    assert shown.exit_code == 0 and "check" in shown.stdout


def test_a_stored_run_is_judged_by_its_id(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    imported = run_cli("import", "nccl-tests", str(H100_440), "--db", db)
    run_id = imported.stdout.split("imported run ")[1].split(":")[0]
    result = run_cli("check", "--from", run_id, "--expect", ND_H100, "--db", db)
    assert result.exit_code == 1 and "Azure's health-check floor" in result.stdout


def test_a_test_that_died_midway_fails_run_completed(tmp_path: Path) -> None:
    result = _check(tmp_path, "--from", str(CORPUS / "nccl_tests_322_failure_midway.txt"), "--expect", "dgx-h100",
                    "--json")
    items = {i["name"]: i for i in json.loads(result.stdout)["items"]}
    assert items["run.completed"]["status"] == "FAIL" and "Test NCCL failure common.cu:1204" in \
        items["run.completed"]["fix"]
    assert items["gpus.count"]["status"] == "SKIP"  # the paste lost its device lines


def test_nccl_info_lines_in_the_output_are_judged_as_the_transport(tmp_path: Path) -> None:
    result = _check(tmp_path, "--from", str(CORPUS / "superbench_a100_all_reduce_8gpu.log"), "--expect", "dgx-a100-40g",
                    "--json")
    items = {i["name"]: i for i in json.loads(result.stdout)["items"]}
    # Its one NCCL line (`Launch mode Parallel`) is read: the transports are not visible, which it says.
    assert items["transport.no-connections"]["status"] == "WARN"
    assert items["gpus.model"]["status"] == "PASS" and items["gpus.count"]["measured"] == 8


@pytest.mark.parametrize(("args", "message"), [
    (("--from", "no-such-file-or-run", "--expect", ND_H100),
     "--from: 'no-such-file-or-run' is neither a file nor a stored run id"),
    (("--from", str(H100_440)), "--from needs --expect"),
    (("--from", str(H100_440), "--expect", ND_H100, "--quick"), "give it without --fleet"),
    (("--from", str(FIXTURES / "probe" / "nccl_1node_nvlink.log"), "--expect", ND_H100), "no nccl-tests result rows"),
    (("--from", str(CORPUS / "rccl_tests_mi325x_egrep_1_2_4_8_nodes.txt"), "--expect", "mi325x-8x"),
     "4 runs of all_reduce"),
    (("--from", str(CORPUS / "nccl_tests_219_failure_before_rows.txt"), "--expect", "dgx-h100"),
     "the test failed before printing any result"),
    (("--from", str(H100_440), "--expect", "no-such-offering"), "--expect"),
    (("--from", str(H100_440), "--expect", ND_H100, "--floors", "/nonexistent/floors.yaml"), "no such file"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _check(tmp_path, *args)
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.output


def test_a_fifo_is_refused_before_it_is_read(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    result = _check(tmp_path, "--from", str(fifo), "--expect", ND_H100)
    assert result.exit_code == 2 and "not a regular file" in result.stderr


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe binary \x00", b"# nThread 1 nGpus 1\n" * 3,
                                     b"     8     2  float  sum  -1  nan  nan  nan  0  1.0  1.0  1.0  0\n"])
def test_empty_binary_or_headless_files_are_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "out.txt"
    path.write_bytes(content)
    result = _check(tmp_path, "--from", str(path), "--expect", ND_H100)
    assert result.exit_code == 2 and "Traceback" not in result.output and result.stderr.count("\n") == 1
