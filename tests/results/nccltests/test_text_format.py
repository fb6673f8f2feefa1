"""nccl-tests text output in its three layouts, several runs per file, and damaged files."""

from __future__ import annotations

import pytest

from linkscope.results.nccltests import parse_nccl_tests_text
from linkscope.results.nccltests.model import nccl_version_from_code, op_from_binary
from linkscope.results.nccltests.text_format import library_version
from tests.results.helpers import CONCATENATED, MALFORMED, PRE_2_13, V2_13, V2_17_CUT


def parse(path):
    return parse_nccl_tests_text(path.read_text(), path.name)


def test_2_13_layout_reads_every_row_with_root_and_wrong_counts():
    parsed = parse(V2_13)
    assert parsed.problems == []
    [section] = parsed.sections
    assert (section.op, section.binary, section.layout) == ("all_reduce", "all_reduce_perf", "2.13")
    assert len(section.rows) == 62  # 31 sizes x (out-of-place, in-place)
    first, last = section.rows[0], section.rows[-1]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (8, 2, "float", "sum", -1)
    assert (first.placement, first.time_us, first.nwrong) == ("out_of_place", 135.8, 0)
    assert (last.size_bytes, last.placement, last.time_us, last.algbw, last.busbw) == (
        8589934592, "in_place", 47743.0, 179.92, 337.35)
    assert section.avg_busbw == 70.742 and section.out_of_bounds == 0 and section.out_of_bounds_ok


def test_2_13_layout_header_devices_and_config():
    parsed = parse(V2_13)
    section = parsed.sections[0]
    assert parsed.world_size == 16 and all(r.world_size == 16 for r in parsed.rows)
    assert parsed.hosts == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert section.devices[9].rank == 9 and section.devices[9].device == 1
    assert section.devices[9].bus_id == "0000:05:00" and section.devices[9].name == "NVIDIA H100 80GB HBM3"
    assert section.devices[9].pid == 6734 and section.devices[9].group == 0
    assert section.config == {"nthreads": 1, "ngpus": 1, "min_bytes": 8, "max_bytes": 8589934592,
                              "step_factor": 2, "warmup_iters": 5, "iters": 20, "agg_iters": 1,
                              "validation": 1, "graph": 0}
    assert all(r.iters == 20 for r in parsed.rows)
    # No "Collective test starting" line in this output: the op comes from the pasted command line.
    assert parsed.command.endswith("/opt/src/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1")


def test_pre_2_13_error_column_keeps_the_deviation_and_leaves_nwrong_unknown():
    parsed = parse(PRE_2_13)
    assert parsed.problems == []
    [section] = parsed.sections
    assert section.layout == "pre-2.13" and len(section.rows) == 50
    assert all(r.nwrong is None and r.max_error == 0.0 for r in section.rows)
    # No root column before 2.13: all-reduce is not rooted.
    assert all(r.root == -1 and r.redop == "sum" for r in section.rows)
    big = [r for r in section.rows if r.size_bytes == 134217728]
    assert [(r.placement, r.time_us, r.busbw) for r in big] == [("out_of_place", 183560.0, 0.73),
                                                                 ("in_place", 174589.0, 0.77)]


def test_pre_2_13_devices_without_group_and_nccl_log_lines_in_between():
    parsed = parse(PRE_2_13)
    section = parsed.sections[0]
    assert [(d.rank, d.host, d.pid, d.group) for d in section.devices] == [
        (0, "ip-10-0-139-244", 1465, None), (1, "ip-10-0-142-242", 46, None)]
    assert parsed.nccl_version == "2.11.4+cuda11.4" and library_version(parsed) == "2.11.4+cuda11.4"
    assert section.op == "all_reduce" and section.avg_busbw == 0.300212


def test_version_header_and_collective_line_of_newer_releases():
    parsed = parse(V2_17_CUT)
    section = parsed.sections[0]
    assert (section.tests_version, section.nccl_headers, section.nccl_library) == ("2.17.6", 22803, 22803)
    assert parsed.tests_version == "2.17.6" and library_version(parsed) == "2.28.3"
    assert section.op == "all_gather" and section.world_size == 2
    assert [(r.placement, r.size_bytes, r.count, r.redop, r.time_us) for r in section.rows] == [
        ("out_of_place", 17179869184, 2147483648, "none", 453650.0),
        ("in_place", 17179869184, 2147483648, "none", 410049.0)]


def test_output_cut_before_its_footer_is_read_and_flagged():
    parsed = parse(V2_17_CUT)
    assert len(parsed.rows) == 2
    assert [p.line for p in parsed.problems] == [1]
    assert "no footer" in str(parsed.problems[0])


# No public nccl-tests output made with `-I 1` could be found. This header and row follow the columns the
# reference documents for 2.19+ (`i_min i_max i_p99 i_cv%` after each placement); the numbers are made up
# for the layout test and are not a measurement.
PER_ITER_HEADER = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min"
                   "    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%")
PER_ITER_ROW = ("     1048576        262144     float     sum      -1    50.00   20.97   36.70       0    48.10"
                "    60.20    58.00     3.10    51.00   20.56   35.98       0    49.00    61.00    60.00     2.90")


def test_2_19_per_iteration_columns_go_to_iter_stats():
    parsed = parse_nccl_tests_text(f"# Collective test starting: all_reduce_perf\n{PER_ITER_HEADER}\n"
                                   f"{PER_ITER_ROW}\n# Avg bus bandwidth    : 36.34\n", "per-iter")
    assert parsed.problems == []
    oop, ip = parsed.rows
    assert parsed.sections[0].layout == "2.19-I"
    assert (oop.time_us, oop.busbw, oop.nwrong) == (50.0, 36.7, 0)
    assert oop.iter_stats == {"min_us": 48.1, "max_us": 60.2, "p99_us": 58.0, "cv_pct": 3.1}
    assert ip.iter_stats == {"min_us": 49.0, "max_us": 61.0, "p99_us": 60.0, "cv_pct": 2.9}


def test_per_iteration_rows_without_header_are_recognised_by_field_count():
    parsed = parse_nccl_tests_text(PER_ITER_ROW + "\n", "bare")
    assert [r.iter_stats["p99_us"] for r in parsed.rows] == [58.0, 60.0]


def test_concatenated_runs_become_one_section_each():
    parsed = parse(CONCATENATED)
    assert parsed.problems == []
    assert [(s.op, s.world_size, len(s.rows)) for s in parsed.sections] == [
        ("all_reduce", 2, 56), ("all_gather", 2, 56), ("broadcast", 2, 56), ("reduce", 2, 56),
        ("reduce", 1, 56), ("all_to_all", 2, 56)]
    assert [s.avg_busbw for s in parsed.sections] == [2.05774, 1.6651, 5.07658, 5.23248, 202818.0, 2.06935]
    assert len(parsed.rows) == 336 and parsed.world_size == 2
    assert all(r.op == s.op and r.world_size == s.world_size for s in parsed.sections for r in s.rows)


def test_concatenated_rows_keep_nccl_tests_specifics():
    sections = parse(CONCATENATED).sections
    broadcast, all_to_all = sections[2], sections[5]
    assert {(r.redop, r.root) for r in broadcast.rows} == {("none", 0)}
    # alltoall does not check its in-place result: nccl-tests prints N/A.
    assert {r.nwrong for r in all_to_all.rows if r.placement == "in_place"} == {None}
    assert {r.nwrong for r in all_to_all.rows if r.placement == "out_of_place"} == {0}
    # all_gather rounds the smallest sizes down to 0 bytes, so size 0 appears twice.
    assert [r.size_bytes for r in sections[1].rows[:4]] == [0, 0, 0, 0]


def test_malformed_file_reads_what_it_can_and_reports_line_numbers():
    parsed = parse(MALFORMED)
    assert len(parsed.rows) == 52  # 31 sizes, 3 damaged, 2 cut off
    assert [p.line for p in parsed.problems] == [7, 39, 41, 45]
    messages = [str(p) for p in parsed.problems]
    assert messages[1].startswith("line 39: expected 13 fields") and "found 10" in messages[1]
    assert messages[2].startswith("line 41: time '12x.9' is not a number")
    assert "no footer" in messages[0]
    assert 4096 not in {r.size_bytes for r in parsed.rows}


def test_launcher_prefixes_are_removed():
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in V2_17_CUT.read_text().splitlines())
    parsed = parse_nccl_tests_text(tagged, "tagged")
    assert [r.time_us for r in parsed.rows] == [453650.0, 410049.0]
    assert parsed.sections[0].op == "all_gather"


@pytest.mark.parametrize("text", ["", "hello\nworld\n", "# just a comment\n", "12 34 is not a row\n"])
def test_text_without_results_gives_no_rows_and_no_exception(text):
    parsed = parse_nccl_tests_text(text, "x")
    assert parsed.rows == []


def test_row_matching_no_layout_is_reported():
    parsed = parse_nccl_tests_text("     8     2  float  sum  -1  1.0  2.0\n", "short")
    assert parsed.rows == [] and parsed.problems[0].line == 1


@pytest.mark.parametrize("binary,op", [
    ("all_reduce_perf", "all_reduce"), ("all_gather_perf", "all_gather"), ("reduce_scatter_perf", "reduce_scatter"),
    ("broadcast_perf", "broadcast"), ("reduce_perf", "reduce"), ("alltoall_perf", "all_to_all"),
    ("sendrecv_perf", "sendrecv"), ("gather_perf", "gather"), ("scatter_perf", "scatter"),
    ("hypercube_perf", "hypercube"), ("alltoallv_perf", "all_to_allv"), ("all_reduce_perf_mpi", "all_reduce"),
    ("/opt/nccl-tests/build/alltoall_perf", "all_to_all"), ("ib_write_bw", "unknown")])
def test_op_names(binary, op):
    assert op_from_binary(binary) == op


def test_nccl_version_codes():
    assert nccl_version_from_code(22803) == "2.28.3"
    assert nccl_version_from_code(21105) == "2.11.5"
    assert nccl_version_from_code(2708) == "2.7.8"


def test_timestamp_column_of_report_timestamps_is_skipped():
    header = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
              "   busbw  #wrong            timestamp")
    line = V2_17_CUT.read_text().splitlines()[11] + "  2025-11-19 10:00:00"
    parsed = parse_nccl_tests_text(f"{header}\n{line}\n# Avg bus bandwidth    : 19.945\n", "ts")
    assert parsed.problems == [] and [r.time_us for r in parsed.rows] == [453650.0, 410049.0]
    assert [r.time_us for r in parse_nccl_tests_text(line, "no-header").rows] == [453650.0, 410049.0]
