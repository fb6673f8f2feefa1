"""The text around the rows follows nccl-tests' layout."""

from __future__ import annotations

from linkscope.bench import printer
from linkscope.bench.config import BenchConfig
from linkscope.bench.layout import RankInfo


def test_parameter_line_is_nccl_tests() -> None:
    lines = printer.run_header(BenchConfig(min_bytes=8, max_bytes=1024, warmup=5, iters=20), {"torch": "2.13"}, "gloo")
    assert lines[0].startswith("# nccl-tests-compatible output from linkscope version ")
    assert lines[1] == ("# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 "
                        "agg iters: 1 validation: 1 graph: 0")


def test_device_lines_one_per_rank_in_rank_order() -> None:
    infos = [RankInfo(1, 1, 0, "gpu59", 28308, 1, "0x17", "NVIDIA H100"),
             RankInfo(0, 0, 0, "gpu59", 28307, 0, "0x16", "NVIDIA H100")]
    lines = printer.device_lines(infos)
    assert lines[0] == "# Using devices"
    assert lines[1] == "#  Rank  0 Group  0 Pid  28307 on      gpu59 device  0 [0x16] NVIDIA H100"
    assert lines[2].startswith("#  Rank  1 ")


def test_op_markers_use_the_perf_binary_name() -> None:
    start = printer.op_start_lines("all_to_all", 0, 1)
    assert start[0] == "# Collective test starting: alltoall_perf"
    assert start[1:] == printer.header_lines() and start[1] == "#"
    assert start[3].startswith("#       size         count      type   redop    root     time   algbw   busbw")
    assert printer.op_start_lines("all_reduce", 1, 3)[0].endswith("(repeat 2 of 3)")
    assert printer.op_end_lines("all_reduce", [])[-2] == "# Collective test concluded: all_reduce_perf"


def test_wrong_lines_name_rank_op_size_and_placement() -> None:
    assert printer.wrong_lines("reduce", 4096, "in_place", {3: 2}) == ["#  rank=3 #wrong=2 (reduce 4096 B in-place)"]


def test_device_line_matches_real_nccl_tests_output() -> None:
    from types import SimpleNamespace

    from linkscope.bench.comm import pci_label

    from tests.conftest import FIXTURES

    text = (FIXTURES / "nccl_tests" / "v2.13_all_reduce_h100_2x8.txt").read_text()
    real = next(line for line in text.splitlines() if line.startswith("#  Rank  1 "))
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x05, pci_device_id=0)
    info = RankInfo(1, 1, 0, "ztan-mig-235z", 6900, 1, pci_label(props), "NVIDIA H100 80GB HBM3")
    assert printer.device_lines([info])[1] == real
    assert pci_label(SimpleNamespace()) == "?"


def test_parameter_line_matches_real_nccl_tests_output() -> None:
    from tests.conftest import FIXTURES

    text = (FIXTURES / "nccl_tests" / "v2.13_all_reduce_h100_2x8.txt").read_text()
    real = next(line for line in text.splitlines() if line.startswith("# nThread"))
    cfg = BenchConfig(min_bytes=8, max_bytes=8 * 1024**3, warmup=5, iters=20)
    assert printer.run_header(cfg, {}, "nccl")[1] == real
