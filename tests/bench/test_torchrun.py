"""Two "nodes" on this machine: two torchrun agents on loopback, one rank each.

linkscope must take torchrun's ranks and rendezvous, record two nodes and the intra-/inter-node groups,
and, when a rank dies, leave the run marked incomplete with the sizes measured so far.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from linkscope.bench.faults import ENV_VAR
from linkscope.results.store import ResultStore

TORCHRUN = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
pytestmark = pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this python")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_nodes(db: Path, extra_env: dict[str, str] | None = None, extra_args: tuple[str, ...] = (),
               on_start: Callable[[], None] | None = None) -> list[subprocess.CompletedProcess[str]]:
    port = _free_port()
    env = {**os.environ, **(extra_env or {})}
    procs = []
    for node in (0, 1):
        cmd = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
               "--master-addr", "127.0.0.1", "--master-port", str(port), "--max-restarts", "0",
               "-m", "linkscope", "bench", "-b", "1K", "-e", "8K", "-n", "2", "-w", "1", "--db", str(db), *extra_args]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    if on_start is not None:
        on_start()
    # Node 0 decides the outcome; a node 1 agent whose worker hangs may outlive it, so it gets a short grace.
    return [_finish(procs[0], 180), _finish(procs[1], 30)]


def _finish(proc: subprocess.Popen[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_tree(proc.pid)
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kill_tree(pid: int) -> None:
    """SIGKILL an agent and its workers (torchrun puts each worker in a process group of its own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    todo, tree = [pid], []
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    for member in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)


def test_two_torchrun_nodes_record_nodes_and_groups(tmp_path: Path) -> None:
    node0, node1 = _two_nodes(tmp_path / "r.db")
    assert node0.returncode == 0, node0.stderr
    assert node1.returncode == 0, node1.stderr
    assert "# Collective test starting: all_reduce_perf" in node0.stdout
    assert "Collective test" not in node1.stdout, "only rank 0 prints"
    store = ResultStore(tmp_path / "r.db")
    (summary,) = store.list_runs()
    run = store.get_run(summary.run_id)
    assert run.status == "complete" and run.world_size == 2 and run.nodes == 2
    assert run.groups["intra_node"] == [[0], [1]]
    assert run.groups["inter_node"] == [[0, 1]]
    assert run.groups["node_of_rank"] == ["node0", "node1"]
    assert len(store.rows(run.run_id)) == 4 * 2


def test_a_dead_rank_under_torchrun_leaves_an_incomplete_run(tmp_path: Path) -> None:
    fault = json.dumps({"action": "exit", "rank": 1, "op": "all_reduce", "size": 4096})
    node0, node1 = _two_nodes(tmp_path / "r.db", {ENV_VAR: fault})
    assert node0.returncode != 0 and node1.returncode != 0
    store = ResultStore(tmp_path / "r.db")
    (summary,) = store.list_runs()
    run = store.get_run(summary.run_id)
    assert run.status == "incomplete", (run.status, node0.stderr[-2000:])
    assert run.error and run.error.startswith("rank 1 last seen before all_reduce 4096 B")
    assert {r.size_bytes for r in store.rows(run.run_id)} == {1024, 2048}


def _hang(size: int) -> dict[str, str]:
    # Bounded, so that the node-1 agent ends on its own once rank 0 has given up.
    return {ENV_VAR: json.dumps({"action": "hang", "rank": 1, "op": "all_reduce", "size": size, "seconds": 8})}


def _stored_run(db: Path):  # noqa: ANN202 - RunInfo
    store = ResultStore(db)
    (summary,) = store.list_runs()
    return store, store.get_run(summary.run_id)


def test_a_hung_rank_under_torchrun_is_named_by_rank_0s_guard(tmp_path: Path) -> None:
    node0, _ = _two_nodes(tmp_path / "r.db", _hang(4096), ("--timeout", "4"))
    assert node0.returncode != 0
    store, run = _stored_run(tmp_path / "r.db")
    assert run.status == "incomplete"
    assert run.error == ("rank 1 stopped making progress for 4 s before all_reduce 4096 B; "
                         "the other ranks waited for it")
    assert {r.size_bytes for r in store.rows(run.run_id)} == {1024, 2048}


def _sigterm_rank_0_once_two_sizes_are_stored(db: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            store = ResultStore(db)
            runs = store.list_runs()
            if runs and len(store.rows(runs[0].run_id)) >= 4:
                os.kill(store.get_run(runs[0].run_id).groups["ranks"][0]["pid"], signal.SIGTERM)
                return
        except Exception:  # noqa: BLE001 - the store may not exist yet
            continue


def test_sigterm_to_rank_0_under_torchrun_marks_the_run_incomplete(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    node0, _ = _two_nodes(db, _hang(4096), ("--timeout", "120"), lambda: _sigterm_rank_0_once_two_sizes_are_stored(db))
    assert node0.returncode != 0
    store, run = _stored_run(db)
    assert run.status == "incomplete"
    assert run.error is not None and run.error.startswith("interrupted by SIGTERM")
    assert {r.size_bytes for r in store.rows(run.run_id)} == {1024, 2048}
