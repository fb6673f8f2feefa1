"""A launcher killed by SIGKILL takes its ranks with it, and its run does not stay `running`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from linkscope.bench.faults import ENV_VAR
from linkscope.results.store import ResultStore, pid_alive


def _wait_for_rows(db: Path, proc: subprocess.Popen, n_rows: int, deadline_s: float) -> list[int]:
    """Rank pids once the run has `n_rows` rows stored."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            with ResultStore(db) as store:
                runs = store.list_runs()
                if runs and len(store.rows(runs[0].run_id)) >= n_rows:
                    return [int(r["pid"]) for r in store.get_run(runs[0].run_id).groups["ranks"]]
        except Exception:  # noqa: BLE001 - not created yet
            continue
    raise AssertionError(f"no {n_rows} rows stored; launcher exit code {proc.poll()}")


def test_ranks_die_with_a_sigkilled_launcher_and_the_run_is_marked_incomplete(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    env = {**os.environ, ENV_VAR: json.dumps({"action": "hang", "rank": 1, "op": "all_reduce", "size": 4096})}
    cmd = [sys.executable, "-m", "linkscope", "bench", "-b", "1K", "-e", "16K", "-n", "2", "-w", "1",
           "--timeout", "600", "--db", str(db)]
    err = (tmp_path / "stderr").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        pids = _wait_for_rows(db, proc, 4, 120)
        assert all(pid_alive(p) for p in pids)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.2)
        assert not [p for p in pids if pid_alive(p)], "ranks outlived their launcher"
    finally:
        if proc.poll() is None:
            proc.kill()
        err.close()
    # multiprocessing's resource tracker frees the queue's semaphores after the kill without a "leaked" warning.
    assert "leaked semaphore" not in (tmp_path / "stderr").read_text()
    with ResultStore(db) as store:
        run = store.get_run(store.list_runs()[0].run_id)
    assert run.status == "incomplete" and "launcher gone" in (run.error or "")
    assert {r.size_bytes for r in ResultStore(db).rows(run.run_id)} == {1024, 2048}
