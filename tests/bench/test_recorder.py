"""The Recorder: rows printed and committed as each size completes; repeats; partial runs; final status."""

from __future__ import annotations

from pathlib import Path

from linkscope.bench.config import BenchConfig, RunOptions
from linkscope.bench.events import SizeResult
from linkscope.bench.layout import RankInfo
from linkscope.bench.recorder import EXIT_FAULT, EXIT_OK, EXIT_USER_ERROR, EXIT_WRONG, Recorder, final_status
from linkscope.results.records import CollectiveRow, RunInfo
from linkscope.results.store import ResultStore


def _rows(size: int, time_us: float, nwrong: int = 0) -> list[CollectiveRow]:
    return [CollectiveRow("all_reduce", size, size // 4, "float", "sum", -1, placement, time_us, 1.0, 1.0, nwrong,
                          world_size=2, iters=5, times_us=[time_us]) for placement in ("out_of_place", "in_place")]


def _recorder(tmp_path: Path, repeat: int = 1) -> tuple[Recorder, list[str]]:
    lines: list[str] = []
    cfg = BenchConfig(min_bytes=8, max_bytes=16, repeat=repeat, run=RunOptions(quiet=False)).validated()
    rec = Recorder(ResultStore(tmp_path / "runs.db"), RunInfo(kind="bench", backend="gloo"), cfg, lines.append, 2)
    rec.begin()
    rec.started([RankInfo(0, 0, None, "h", 1, 0, "cpu", "CPU"), RankInfo(1, 1, None, "h", 2, 0, "cpu", "CPU")])
    return rec, lines


def test_each_size_is_committed_as_it_completes(tmp_path: Path) -> None:
    rec, lines = _recorder(tmp_path)
    rec.op_started("all_reduce", 0)
    rec.size_done(SizeResult(0, "all_reduce", 0, _rows(8, 10.0)))
    # Another connection sees the first size before the sweep goes on.
    assert len(ResultStore(tmp_path / "runs.db").rows(rec.info.run_id)) == 2
    rec.size_done(SizeResult(0, "all_reduce", 1, _rows(16, 12.0)))
    rec.op_finished("all_reduce", 0)
    rec.close("complete", None)
    store = ResultStore(tmp_path / "runs.db")
    assert [r.size_bytes for r in store.rows(rec.info.run_id)] == [8, 8, 16, 16]
    run = store.get_run(rec.info.run_id)
    assert run.status == "complete" and run.world_size == 2 and run.hosts == ["h"]
    assert any(line.startswith("           8             2     float     sum") for line in lines)
    assert "# Collective test concluded: all_reduce_perf" in lines


def test_repeats_are_stored_once_with_their_spread(tmp_path: Path) -> None:
    rec, lines = _recorder(tmp_path, repeat=2)
    for repeat, time_us in ((0, 10.0), (1, 30.0)):
        rec.op_started("all_reduce", repeat)
        rec.size_done(SizeResult(repeat, "all_reduce", 0, _rows(8, time_us)))
        rec.size_done(SizeResult(repeat, "all_reduce", 1, _rows(16, time_us)))
        rec.op_finished("all_reduce", repeat)
    rec.close("complete", None)
    rows = ResultStore(tmp_path / "runs.db").rows(rec.info.run_id)
    assert len(rows) == 4
    assert all(r.repeats == 2 and r.time_us == 20.0 and r.times_us == [10.0, 30.0] for r in rows)
    assert any("mean over 2 repeats" in line for line in lines)


def test_a_run_cut_short_keeps_partial_repeats(tmp_path: Path) -> None:
    rec, _ = _recorder(tmp_path, repeat=2)
    rec.op_started("all_reduce", 0)
    rec.size_done(SizeResult(0, "all_reduce", 0, _rows(8, 10.0)))
    rec.close("incomplete", "rank 1 died")
    store = ResultStore(tmp_path / "runs.db")
    rows = store.rows(rec.info.run_id)
    assert [(r.size_bytes, r.repeats) for r in rows] == [(8, 1), (8, 1)]
    assert store.get_run(rec.info.run_id).error == "rank 1 died"


def test_wrong_results_are_named(tmp_path: Path) -> None:
    rec, lines = _recorder(tmp_path)
    rec.op_started("all_reduce", 0)
    rec.size_done(SizeResult(0, "all_reduce", 0, _rows(8, 10.0, nwrong=1), {"in_place": {1: 1}}))
    assert rec.wrong == ["all_reduce 8 B in-place on rank(s) 1"]
    assert "#  rank=1 #wrong=1 (all_reduce 8 B in-place)" in lines


def test_final_status_and_exit_codes() -> None:
    assert final_status("complete", [], "") == ("complete", EXIT_OK, None)
    assert final_status("complete", ["x"], "")[:2] == ("failed", EXIT_WRONG)
    assert final_status("fault", [], "rank 1 died") == ("incomplete", EXIT_FAULT, "rank 1 died")
    assert final_status("interrupted", [], "stop")[:2] == ("incomplete", EXIT_FAULT)
    assert final_status("user_error", [], "bad")[:2] == ("failed", EXIT_USER_ERROR)
