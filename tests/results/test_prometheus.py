"""The node_exporter textfile: NCCL Inspector's metric names and labels, check verdicts, atomic writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from linkscope.results.prometheus import check_samples, human_size, run_samples, textfile
from linkscope.results.records import CollectiveRow, RunInfo
from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli
from tests.conftest import FIXTURES

# One sample line: name{label="value",...} number (the Prometheus text exposition format).
SAMPLE = re.compile(r'^[a-z_]+\{([a-z_]+="(?:[^"\\]|\\.)*")(,[a-z_]+="(?:[^"\\]|\\.)*")*\} -?[0-9.e+-]+$')


def test_message_size_is_written_as_inspector_writes_it() -> None:
    # inspectorFormatHumanReadableSize: "%zuB" below 1 KiB, else "%.2f" with B/KB/MB/GB/TB in 1024 steps.
    assert [human_size(n) for n in (8, 1023, 1024, 8 << 20, 3 << 30)] == ["8B", "1023B", "1.00KB", "8.00MB",
                                                                          "3.00GB"]


def test_a_run_gives_the_three_inspector_metrics_per_size_with_its_labels() -> None:
    info = RunInfo(kind="bench", run_id="abcd1234", hosts=["node-a", "node-b"], world_size=16, nodes=2)
    rows = [CollectiveRow(op="all_reduce", size_bytes=8 << 20, count=2 << 20, dtype="float", redop="sum", root=-1,
                          placement=p, time_us=100.0, algbw=83.886, busbw=157.29, nwrong=0, world_size=16,
                          nccl_algo="RING", nccl_proto="SIMPLE") for p in ("out_of_place", "in_place")]
    samples = run_samples(info, rows)
    assert [s.split("{")[0] for s in samples] == ["nccl_algorithm_bandwidth_gbs", "nccl_bus_bandwidth_gbs",
                                                  "nccl_collective_exec_time_microseconds"]
    assert samples[1] == ('nccl_bus_bandwidth_gbs{collective="AllReduce",hostname="node-a",rank="0",nranks="16",'
                          'n_nodes="2",message_size="8.00MB",message_size_bytes="8388608",run_id="abcd1234",'
                          'algorithm="RING",protocol="SIMPLE"} 157.29')
    text = textfile(samples + check_samples([{"name": "p2p.bandwidth", "status": "FAIL"}], "abcd1234", "node-a"))
    assert "# TYPE nccl_bus_bandwidth_gbs gauge" in text and text.endswith("\n")
    assert all(SAMPLE.match(line) for line in text.splitlines() if not line.startswith("#"))
    assert 'linkscope_check_status{item="p2p.bandwidth",hostname="node-a",status="FAIL",run_id="abcd1234"} 2' in text


def test_label_values_are_escaped() -> None:
    (line,) = check_samples([{"name": 'a"b\\c\nd', "status": "PASS"}], "r", "h")
    assert 'item="a\\"b\\\\c\\nd"' in line and SAMPLE.match(line)


def test_export_prometheus_writes_a_textfile_of_a_stored_run(tmp_path: Path) -> None:
    db, out = tmp_path / "r.db", tmp_path / "linkscope.prom"
    assert run_cli("import", "nccl-tests", str(FIXTURES / "nccl_tests" / "v2.13_all_reduce_h100_2x8.txt"),
                   "--db", str(db)).exit_code == 0
    with ResultStore(db) as store:
        (run,) = store.list_runs()
    result = run_cli("export", run.run_id, "--prometheus", str(out), "--db", str(db))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert 'collective="AllReduce"' in text and 'nranks="16"' in text and 'n_nodes="2"' in text
    assert not list(tmp_path.glob(".linkscope.prom.*"))  # the temporary file was renamed into place


@pytest.mark.parametrize("args", [("--prometheus", "/nonexistent-dir/x.prom"),
                                  ("--prometheus", "{tmp}/x.prom", "--csv")])
def test_bad_prometheus_output_is_one_line_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    db = tmp_path / "r.db"
    run_cli("import", "nccl-tests", str(FIXTURES / "nccl_tests" / "v2.13_all_reduce_h100_2x8.txt"), "--db", str(db))
    with ResultStore(db) as store:
        (run,) = store.list_runs()
    result = run_cli("export", run.run_id, *[a.format(tmp=tmp_path) for a in args], "--db", str(db))
    assert result.exit_code == 2 and "Traceback" not in result.output
