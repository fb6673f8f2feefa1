"""The nccl-tests text table, the `-J`-style JSON and the CSV export."""

from __future__ import annotations

import csv
import io
import json

import pytest

from linkscope.results.export import (CSV_COLUMNS, avg_busbw, format_nccl_tests_table, format_table_footer,
                                      format_table_header, format_table_row, run_to_csv, run_to_json)
from linkscope.results.nccltests import parse_nccl_tests_text
from linkscope.results.nccltests.table import format_float
from linkscope.results.records import CollectiveRow, PairRow, RunInfo
from tests.results.helpers import CONCATENATED, V2_17_CUT


def rows_of(path):
    return parse_nccl_tests_text(path.read_text(), path.name).rows


@pytest.mark.parametrize("value,width,printed", [
    # Times as nccl-tests 2.18 printed them (real rows), and bandwidths.
    (37.69, 7, "  37.69"), (1556.34, 7, "1556.34"), (12220.9, 7, "12220.9"), (196284.0, 7, " 196284"),
    (453650.0, 7, " 453650"), (12345678.0, 7, "1.2e+07"), (0.0, 7, "   0.00"),
    (43.76, 6, " 43.76"), (180.71, 6, "180.71"), (1797.05, 6, "1797.0"), (14586.35, 6, " 14586"),
    (232613.05, 6, "232613"), (5706839.35, 6, " 6e+06")])
def test_format_float_matches_nccl_tests(value, width, printed):
    assert format_float(value, width) == printed


def test_table_reproduces_real_nccl_tests_lines_exactly():
    original = V2_17_CUT.read_text().splitlines()
    oop, ip = rows_of(V2_17_CUT)
    header = format_table_header().splitlines()
    assert header == ["#"] + original[8:11]
    assert format_table_row(oop, ip) == original[11] + "\n"


def test_avg_busbw_matches_the_footers_nccl_tests_printed():
    for section in parse_nccl_tests_text(CONCATENATED.read_text(), "x").sections:
        # busbw is printed with 2 decimals; nccl-tests averaged the unrounded values.
        assert avg_busbw(section.rows) == pytest.approx(section.avg_busbw, abs=0.005, rel=1e-4)


def test_footer_counts_failed_placements_and_checks_the_minimum_bandwidth():
    rows = rows_of(V2_17_CUT)
    assert format_table_footer(rows) == ("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 19.945 \n"
                                         "#\n# Collective test concluded: all_gather_perf\n")
    rows[1].nwrong = 12
    footer = format_table_footer(rows, check_avg_bw=25.0)
    assert footer.splitlines()[:2] == ["# Out of bounds values : 1 FAILED", "# Avg bus bandwidth    : 19.945 FAILED"]
    assert "19.945 OK" in format_table_footer(rows, check_avg_bw=20.0)


def test_unchecked_placement_prints_na_and_missing_placement_is_blank():
    oop, ip = rows_of(V2_17_CUT)
    ip.nwrong = None
    assert format_table_row(oop, ip).rstrip("\n").endswith("20.95    N/A")
    only_in_place = format_table_row(None, ip)
    assert only_in_place[52:84] == " " * 32 and "410049" in only_in_place


def test_table_keeps_duplicate_sizes_and_separates_ops():
    rows = rows_of(CONCATENATED)
    table = format_nccl_tests_table(rows)
    assert table.count("# Collective test concluded:") == 6  # reduce ran on 2 ranks, then on 1
    assert table.count("\n           0             0     float    none      -1") == 4  # all_gather + alltoall
    data = [line for line in table.splitlines() if line and not line.startswith("#")]
    assert len(data) == len(rows) // 2


def test_table_round_trips_through_the_parser():
    rows = rows_of(CONCATENATED)
    again = parse_nccl_tests_text(format_nccl_tests_table(rows), "again")
    assert again.problems == []
    assert [(r.op, r.size_bytes, r.placement, r.nwrong) for r in again.rows] == [
        (r.op, r.size_bytes, r.placement, r.nwrong) for r in rows]


def run_with_rows():
    info = RunInfo(kind="bench", label="lab", run_id="abcd1234", started_at="2025-01-01T00:00:00+00:00",
                   ended_at="2025-01-01T00:01:00+00:00", status="complete", hosts=["h"], world_size=2,
                   backend="gloo", versions={"nccl": "2.21.5+cuda12.4"}, nccl_env={"NCCL_ALGO": "Ring"},
                   config={"iters": 20, "min_bytes": 8, "op": "all_reduce"},
                   groups={"ranks": [{"rank": 0, "host": "h", "device": 0, "name": "cpu", "bus_id": ""}]},
                   command="linkscope bench --op 'all reduce'")
    rows = [CollectiveRow("all_reduce", 8, 2, "float", "sum", -1, "out_of_place", 10.0, 0.0008, 0.0008, 0,
                          world_size=2, iters=20, repeats=3, time_us_min=9.0, time_us_max=11.0, time_us_stdev=1.0,
                          times_us=[9.0, 10.0, 11.0]),
            CollectiveRow("all_reduce", 8, 2, "float", "sum", -1, "in_place", 12.0, 0.0007, 0.0007, None,
                          world_size=2, iters=20)]
    return info, rows


def test_run_to_json_follows_the_nccl_tests_schema():
    info, rows = run_with_rows()
    doc = run_to_json(info, rows, [PairRow(0, 1, 8, 1.0, 2.0, 3.0)])
    json.dumps(doc)  # plain JSON types only
    assert doc["version"] == 1 and doc["nccl_version"] == 22105
    assert doc["args"] == ["linkscope", "bench", "--op", "all reduce"] and doc["env"] == ["NCCL_ALGO=Ring"]
    assert doc["config"] == {"iterations": 20, "minimum_bytes": 8,
                             "devices": [{"rank": 0, "hostname": "h", "device": 0, "device_info": "cpu",
                                          "device_hex": ""}]}
    [result] = doc["results"]
    assert {k: result[k] for k in ("size", "count", "type", "redop", "root")} == {
        "size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1"}
    assert result["out_of_place"] == {"time": 10.0, "alg_bw": 0.0008, "bus_bw": 0.0008, "nwrong": 0.0}
    assert result["in_place"]["nwrong"] is None
    assert result["linkscope"]["out_of_place"]["time_us_stdev"] == 1.0
    assert result["linkscope"]["out_of_place"]["repeats"] == 3
    assert doc["out_of_bounds"] == {"count": 0, "okay": "true"}
    assert doc["average_bus_bandwidth"]["bandwidth"] == pytest.approx(0.00075)
    ls = doc["linkscope"]
    assert (ls["run_id"], ls["label"], ls["status"], ls["hosts"]) == ("abcd1234", "lab", "complete", ["h"])
    assert ls["pairs"] == [{"src": 0, "dst": 1, "size_bytes": 8, "uni_gb_per_s": 1.0, "bi_gb_per_s": 2.0,
                            "latency_us": 3.0}]


def test_run_to_json_reads_back_as_nccl_tests_json():
    from linkscope.results.nccltests import parse_nccl_tests_json

    rows = rows_of(CONCATENATED)[:56]  # the all_reduce run
    info = RunInfo(kind="import", command="./build/all_reduce_perf -b 8 -e 1024M -f 2 -g2")
    parsed = parse_nccl_tests_json(json.loads(json.dumps(run_to_json(info, rows, []))), "export.json")
    assert parsed.problems == []
    assert [(r.op, r.size_bytes, r.placement, r.time_us, r.busbw) for r in parsed.rows] == [
        (r.op, r.size_bytes, r.placement, r.time_us, r.busbw) for r in rows]


def test_run_to_csv():
    _, rows = run_with_rows()
    parsed = list(csv.DictReader(io.StringIO(run_to_csv(rows))))
    assert tuple(parsed[0]) == CSV_COLUMNS
    assert parsed[0]["algbw_gb_per_s"] == "0.0008" and parsed[0]["time_us_stdev"] == "1.0"
    assert parsed[1]["placement"] == "in_place" and parsed[1]["nwrong"] == "" and parsed[1]["time_us_min"] == ""


def test_a_train_run_csv_names_the_peak_each_mfu_is_of() -> None:
    from linkscope.results.export import train_run_to_csv
    from linkscope.results.records import RunInfo

    doc = {"label": "p", "status": "ok", "model": "llama3-8b", "ranks": 8, "parallelism": {"layout": "ddp"},
           "step_time_s": 1.0, "mfu": 0.4, "mfu_peak_tflops": 989.0, "mfu_precision": "bf16", "predicted": None}
    info = RunInfo(kind="train", extra={"train_summary": {"points": [doc]}})
    header, row = train_run_to_csv(info).splitlines()
    values = dict(zip(header.split(","), row.split(",")))
    assert (values["mfu"], values["mfu_peak_tflops"], values["mfu_precision"]) == ("0.4", "989.0", "bf16")
