"""Exposed communication from Kineto traces, checked against HolisticTraceAnalysis on real traces.

Fixtures (tests/fixtures/traces/): `hta_gpu/` are two ranks of a real 2-GPU NCCL training trace from HTA's own
test data (MIT licence, see its README); `gloo/` is a real 2-rank `bench train` trace recorded on CPU ranks here.
HTA's numbers for the GPU traces are pinned below (HTA 0.5.0 `get_comm_comp_overlap`) and, where HTA is
installed, recomputed by HTA itself on the same files.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from pathlib import Path

import pytest

from linkscope.bench.train import trace_comm
from linkscope.bench.train.trace_comm import analyze, collective_kind, intersection, merge, read_rank
from linkscope.results import kineto
from linkscope.results.kineto import iter_events, read_header

TRACES = Path(__file__).parents[2] / "fixtures" / "traces"
GPU = sorted((TRACES / "hta_gpu").glob("*.json.gz"))
GLOO = sorted((TRACES / "gloo").glob("*.json.gz"))
HTA_OVERLAP_PCT = {0: 11.81, 1: 20.05}
"""HTA 0.5.0 `get_comm_comp_overlap()` on the hta_gpu fixture, as HTA printed it."""


def test_interval_algebra() -> None:
    assert merge([(5, 6), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 6)]
    assert intersection([(0, 4), (5, 6)], [(1, 2), (3, 5.5)]) == pytest.approx(1 + 1 + 0.5)
    assert intersection([], [(0, 1)]) == 0
    assert trace_comm.subtract([(0, 10), (12, 14)], [(2, 3), (4, 5), (9, 13)]) == [(0, 2), (3, 4), (5, 9), (13, 14)]
    assert trace_comm.subtract([(0, 1)], []) == [(0, 1)]


def test_collective_kind_prefers_the_collective_name() -> None:
    assert collective_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", {}) == "sendrecv"
    assert collective_kind("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", {}) == "all_reduce"
    assert collective_kind("ncclDevKernel_Generic", {"Collective name": "allgather"}) == "all_gather"
    assert collective_kind("gloo:all_reduce") == "all_reduce"
    assert collective_kind("gloo:_reduce_scatter_base") == "reduce_scatter"


def test_the_streaming_reader_yields_what_json_load_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    # A tiny buffer forces events, strings and numbers across chunk boundaries.
    monkeypatch.setattr(kineto, "CHUNK_CHARS", 7)
    with gzip.open(GLOO[0], "rt") as f:
        whole = json.loads(f.read())
    events = list(iter_events(GLOO[0]))
    assert events == whole["traceEvents"]
    assert read_header(GLOO[0]).rank == whole["distributedInfo"]["rank"]


def test_a_broken_trace_is_one_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.json"
    bad.write_text('{"traceEvents": [{"ph": "X"}, ', encoding="utf-8")
    from linkscope.hardware.errors import UserError

    with pytest.raises(UserError, match="not a readable Kineto trace"):
        list(iter_events(bad))


def test_gpu_overlap_matches_htas_numbers() -> None:
    report = analyze(GPU)
    assert report.source == "gpu"
    for rank in report.ranks:
        assert rank.overlap_pct == pytest.approx(HTA_OVERLAP_PCT[rank.rank], abs=0.005)
        for kind, comm in rank.comm_s.items():
            assert 0 < rank.exposed_comm_s[kind] <= comm
    assert report.comm_s.keys() == {"sendrecv"}
    assert report.slowest_rank == 1 and report.held_back_s > 0


def test_gpu_overlap_agrees_with_hta_itself(tmp_path: Path) -> None:
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install holistictraceanalysis)")
    from hta.trace_analysis import TraceAnalysis

    for path in GPU:
        shutil.copy(path, tmp_path)
    logging.disable(logging.WARNING)
    try:
        frame = TraceAnalysis(trace_dir=str(tmp_path)).get_comm_comp_overlap(visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    theirs = dict(zip(frame["rank"], frame["comp_comm_overlap_pctg"]))
    ours = {rc.rank: rc.overlap_pct() for rc in (read_rank(p, hta_rounding=True) for p in GPU)}
    assert theirs.keys() == ours.keys()
    for rank, pct in theirs.items():
        assert ours[rank] == pytest.approx(pct, abs=0.005)


def test_gloo_trace_shows_the_gradient_all_reduce() -> None:
    report = analyze(GLOO)
    assert report.source == "cpu"
    assert [r.rank for r in report.ranks] == [0, 1]
    for rank in report.ranks:
        assert rank.steps == 2  # the ProfilerStep marks bench train writes
        assert rank.comm_s["all_reduce"] > 0
        assert 0 <= rank.exposed_comm_s["all_reduce"] <= rank.comm_s["all_reduce"]
        assert rank.compute_s > 0


def test_cpu_compute_leaves_out_the_communication_threads() -> None:
    rc = read_rank(GLOO[0])
    comm = rc.comm_union()
    # gloo's worker threads run the collectives; the training thread's operators are the compute.
    assert trace_comm.length(comm) > 0 and rc.compute
