"""Faults on local ranks: a wrong result, a rank that exits, hangs or is killed, and Ctrl-C.

Each fault is injected through LINKSCOPE_TEST_FAULT (linkscope.bench.faults) or a real signal. Every
case must end with a message naming the rank, a non-zero exit code, and every size measured before
the fault in the store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from linkscope.bench.config import BenchConfig, RunOptions
from linkscope.bench.faults import ENV_VAR
from linkscope.bench.recorder import EXIT_FAULT, EXIT_WRONG
from linkscope.bench.runner import run_bench
from linkscope.results.store import ResultStore

SIZES = dict(min_bytes=1024, max_bytes=16384, iters=2, warmup=1)


def _config(db: Path, timeout_s: float = 60.0) -> BenchConfig:
    return BenchConfig(ops=("all_reduce",), **SIZES, run=RunOptions(nproc=2, db_path=str(db), timeout_s=timeout_s,
                                                                     quiet=True))


def _fault(monkeypatch: pytest.MonkeyPatch, action: str, size: int, rank: int = 1) -> None:
    monkeypatch.setenv(ENV_VAR, json.dumps({"action": action, "rank": rank, "op": "all_reduce", "size": size}))


def test_no_fault_without_the_variable() -> None:
    from linkscope.bench.faults import active_fault

    assert ENV_VAR not in os.environ
    assert active_fault() is None


def test_a_corrupted_element_fails_the_run_naming_op_size_and_rank(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _fault(monkeypatch, "corrupt", 4096)
    result = run_bench(_config(tmp_path / "r.db"), emit=lambda line: None)
    assert result.exit_code == EXIT_WRONG and result.status == "failed"
    assert "all_reduce 4096 B out-of-place on rank(s) 1" in (result.error or "")
    wrong = {(r.size_bytes, r.placement): r.nwrong for r in result.rows}
    assert wrong[(4096, "out_of_place")] == 1 and wrong[(4096, "in_place")] == 1
    assert wrong[(2048, "out_of_place")] == 0
    assert ResultStore(tmp_path / "r.db").get_run(result.run_id).status == "failed"


def test_a_rank_that_exits_is_named_and_earlier_sizes_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fault(monkeypatch, "exit", 4096)
    result = run_bench(_config(tmp_path / "r.db"), emit=lambda line: None)
    assert result.exit_code == EXIT_FAULT and result.status == "incomplete"
    assert result.error == "rank 1 exited with code 17 before all_reduce 4096 B"
    store = ResultStore(tmp_path / "r.db")
    assert sorted({r.size_bytes for r in store.rows(result.run_id)}) == [1024, 2048]
    assert store.get_run(result.run_id).status == "incomplete"


def test_a_hung_rank_is_named_within_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fault(monkeypatch, "hang", 2048)
    # A 4 s timeout is safe even when torch imports slowly: the stall clock starts once every rank is ready.
    start = time.monotonic()
    result = run_bench(_config(tmp_path / "r.db", timeout_s=4.0), emit=lambda line: None)
    assert time.monotonic() - start < 60
    assert result.exit_code == EXIT_FAULT and result.status == "incomplete"
    assert result.error is not None and result.error.startswith("rank 1 stopped making progress for 4 s")
    assert "all_reduce 2048 B" in result.error
    assert {r.size_bytes for r in ResultStore(tmp_path / "r.db").rows(result.run_id)} == {1024}


def _kill_rank_when_stored(db: Path, rank: int, done: threading.Event, sig: int = signal.SIGKILL) -> None:
    """Wait until the run's layout and two sizes are stored, then send `sig` to one rank by its pid."""
    while not done.is_set():
        try:
            store = ResultStore(db)
            runs = store.list_runs()
            if runs and len(store.rows(runs[0].run_id)) >= 4:
                pid = store.get_run(runs[0].run_id).groups["ranks"][rank]["pid"]
                os.kill(pid, sig)
                return
        except Exception:  # noqa: BLE001 - the store may not exist yet
            pass
        time.sleep(0.1)


def test_a_rank_killed_by_a_signal_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rank 1 parks at 4096 B so the kill lands at a known place.
    _fault(monkeypatch, "hang", 4096)
    done = threading.Event()
    killer = threading.Thread(target=_kill_rank_when_stored, args=(tmp_path / "r.db", 1, done), daemon=True)
    killer.start()
    result = run_bench(_config(tmp_path / "r.db"), emit=lambda line: None)
    done.set()
    assert result.exit_code == EXIT_FAULT
    assert result.error == "rank 1 was killed by SIGKILL before all_reduce 4096 B"
    assert {r.size_bytes for r in result.rows} == {1024, 2048}


def test_a_stopped_rank_is_named_as_the_one_that_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # SIGSTOP freezes rank 1 while rank 0 waits in the collective; the watchdog must blame rank 1, not "no rank".
    _fault(monkeypatch, "hang", 4096)
    done = threading.Event()
    stopper = threading.Thread(target=_kill_rank_when_stored, args=(tmp_path / "r.db", 1, done, signal.SIGSTOP),
                               daemon=True)
    stopper.start()
    result = run_bench(_config(tmp_path / "r.db", timeout_s=5.0), emit=lambda line: None)
    done.set()
    assert result.exit_code == EXIT_FAULT and result.status == "incomplete"
    assert (result.error or "").startswith("rank 1 stopped making progress for 5 s before all_reduce 4096 B")
    assert {r.size_bytes for r in result.rows} == {1024, 2048}


def test_a_rank_stopped_inside_a_size_is_named_though_every_counter_is_level(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Rank 0 dozes before 4096 B while rank 1 goes in and is SIGSTOPped there; once rank 0 joins it, both counters
    # are level, so only the stopped process itself can tell the watchdog whom to blame.
    monkeypatch.setenv(ENV_VAR, json.dumps({"action": "hang", "rank": 0, "op": "all_reduce", "size": 4096,
                                            "seconds": 2}))
    done = threading.Event()
    stopper = threading.Thread(target=_kill_rank_when_stored, args=(tmp_path / "r.db", 1, done, signal.SIGSTOP),
                               daemon=True)
    stopper.start()
    result = run_bench(_config(tmp_path / "r.db", timeout_s=3.0), emit=lambda line: None)
    done.set()
    assert result.exit_code == EXIT_FAULT and result.status == "incomplete"
    assert (result.error or "").startswith("rank 1 stopped making progress for 3 s"), result.error


def test_a_rank_still_computing_past_the_timeout_is_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A step slower than --timeout on a loaded machine: rank 1 keeps using CPU, so the watchdog waits for it.
    monkeypatch.setenv(ENV_VAR, json.dumps({"action": "spin", "rank": 1, "op": "all_reduce", "size": 2048,
                                            "seconds": 5}))
    result = run_bench(_config(tmp_path / "r.db", timeout_s=1.5), emit=lambda line: None)
    assert result.exit_code == 0 and result.status == "complete", result.error
    assert {r.size_bytes for r in result.rows} == {1024, 2048, 4096, 8192, 16384}


def test_ctrl_c_stops_the_ranks_and_keeps_what_was_measured(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    env = {**os.environ, ENV_VAR: json.dumps({"action": "hang", "rank": 1, "op": "all_reduce", "size": 4096})}
    cmd = [sys.executable, "-m", "linkscope", "bench", "-b", "1K", "-e", "16K", "-n", "2", "-w", "1", "--db", str(db)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            runs = ResultStore(db).list_runs()
            if runs and len(ResultStore(db).rows(runs[0].run_id)) >= 4:
                break
        except Exception:  # noqa: BLE001 - not created yet
            continue
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_FAULT, err
    assert "interrupted" in err
    run = ResultStore(db).list_runs()[0]
    assert run.status == "incomplete"
    assert "stored as run" in out and run.run_id in out
