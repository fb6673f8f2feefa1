"""`bench moe` under torchrun: two "nodes" on loopback, one rank each; rank 0 records, nodes are torchrun's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.bench.test_torchrun import TORCHRUN, _finish, _free_port

pytestmark = pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this python")


def test_two_torchrun_nodes_count_destination_nodes(tmp_path: Path) -> None:
    port = _free_port()
    procs = [subprocess.Popen([str(TORCHRUN), "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
                               "--master-addr", "127.0.0.1", "--master-port", str(port), "--max-restarts", "0",
                               "-m", "linkscope", "bench", "moe", "--tokens-per-rank", "64", "--hidden", "128",
                               "--topk", "2", "--experts", "4", "-n", "2", "-w", "1", "--db", str(tmp_path / "r.db"),
                               "--json"],
                              env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for node in (0, 1)]
    node0, node1 = _finish(procs[0], 180), _finish(procs[1], 30)
    assert node0.returncode == 0 and node1.returncode == 0, node0.stderr + node1.stderr
    doc = json.loads(node0.stdout)
    assert node1.stdout.strip() == ""  # only rank 0 prints
    assert doc["ranks"] == 2 and doc["nodes"] == 2
    # One rank per node: a token's distinct destination nodes are its distinct destination ranks.
    assert doc["nodes_per_token"] == doc["ranks_per_token"]
    assert doc["dispatch_bytes_per_rank"] == pytest.approx(64 * doc["nodes_per_token"] * doc["token_bytes"]["dispatch"])
