"""kineto's trace markers are kept off stderr; every other line, C++ or Python, still gets there."""

from __future__ import annotations

import os
import sys

import pytest

from linkscope.bench.train.profiler_noise import kept_lines, without_marker_lines

MARKERS = (b"USDT:2026-12-03 14:19:24 4015:4015 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
           b"STAGE:2024-01-01 00:00:00 1:1 ActivityProfilerController.cpp:312] Completed Stage: Warm Up\n")


def test_only_the_marker_lines_are_dropped() -> None:
    data = MARKERS + b"ERROR:2026-12-03 CuptiActivityApi.cpp:1] failed\nplain line without newline"
    assert kept_lines(data) == b"ERROR:2026-12-03 CuptiActivityApi.cpp:1] failed\nplain line without newline"


def test_lines_written_to_the_descriptor_are_filtered_and_the_rest_kept(capfd: pytest.CaptureFixture[str]) -> None:
    with without_marker_lines():
        os.write(2, MARKERS)  # as libkineto's std::cerr writes them, below Python
        os.write(2, b"WARNING: a real one\n")
        print("python says", file=sys.stderr)
    print("after", file=sys.stderr)
    err = capfd.readouterr().err
    assert "USDT:" not in err and "STAGE:" not in err
    # (capfd keeps Python's writes apart from the descriptor's, so only the lines are compared, not their order)
    assert sorted(err.splitlines()) == ["WARNING: a real one", "after", "python says"]


def test_what_the_block_wrote_is_kept_when_it_raises(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError), without_marker_lines():
        os.write(2, b"USDT: start\nreal error text\n")
        raise RuntimeError("boom")
    assert capfd.readouterr().err == "real error text\n"


def test_a_real_cpu_trace_starts_and_stops_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU])
    with without_marker_lines():
        prof.start()
    torch.ones(8).sum()
    with without_marker_lines():
        prof.stop()
    assert "USDT:" not in capfd.readouterr().err
