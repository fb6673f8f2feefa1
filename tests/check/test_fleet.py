"""`check --fleet`: the rules on recorded figures, and 4 torchrun agents on loopback with one node slowed on purpose
(the LINKSCOPE_TEST_SLOW_SEND_S test hook, set for that agent only), which must be the node named."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from linkscope.bench.faults import SLOW_SEND_ENV
from linkscope.bench.fleet import pair_rounds
from linkscope.check import fleet_rules
from linkscope.check.fleet import _history, window_seconds
from linkscope.check.items import Thresholds
from linkscope.hardware.errors import UserError
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore
from tests.bench.test_torchrun import TORCHRUN, _finish, _free_port
from tests.cli.helpers import run_cli


@pytest.mark.parametrize("nodes", [2, 3, 4, 5, 8])
def test_rounds_give_every_node_a_new_partner_each_round(nodes: int) -> None:
    rounds = pair_rounds(nodes, 1000)
    met = [pair for r in rounds for pair in r]
    assert len(met) == len(set(met)) == nodes * (nodes - 1) // 2  # every pair exactly once over all rounds
    for r in rounds:
        members = [n for pair in r for n in pair]
        assert len(members) == len(set(members))  # no node twice in a round
    assert len(pair_rounds(nodes, 2)) == min(2, len(rounds))


def _pairs(slow: int, nodes: int = 4, fast: float = 10.0, slow_rate: float = 0.5) -> list[dict]:
    return [{"round": i, "node_a": a, "node_b": b, "rank_a": a, "rank_b": b,
             "gb_per_s": slow_rate if slow in (a, b) else fast}
            for i, r in enumerate(pair_rounds(nodes, 3)) for a, b in r]


def test_the_node_slow_with_every_partner_is_the_one_named() -> None:
    hosts = ["a", "b", "c", "d"]
    items = fleet_rules.pair_items(_pairs(slow=2), hosts, Thresholds())
    assert {n: i.status for n, i in items.items()} == {0: "PASS", 1: "PASS", 2: "FAIL", 3: "PASS"}
    assert items[2].fix.startswith("c at 5% of the fleet's median node, slow with every partner (a, b, d)")


def test_two_nodes_cannot_tell_a_slow_node_from_a_slow_pair() -> None:
    items = fleet_rules.pair_items(_pairs(slow=1, nodes=2), ["a", "b"], Thresholds())
    assert {i.status for i in items.values()} == {"SKIP"}


def test_a_node_below_its_own_history_fails() -> None:
    assert fleet_rules.history_item("a", 8.0, [10.0, 10.5, 9.5], 10.0, "7d").status == "FAIL"
    assert fleet_rules.history_item("a", 9.5, [10.0, 10.5, 9.5], 10.0, "7d").status == "PASS"
    assert fleet_rules.history_item("a", 9.5, [], 10.0, "7d").status == "SKIP"


def test_nodes_that_never_joined_are_named() -> None:
    item = fleet_rules.membership_item(["a", "b"], ["a", "b", "c"], None)
    assert item.status == "FAIL" and "never joined: c" in item.fix
    assert fleet_rules.membership_item(["a", "b"], [], 4).status == "FAIL"
    assert fleet_rules.membership_item(["a", "b"], [], None).status == "SKIP"


@pytest.mark.parametrize("since", ["7", "7w", "-1d", "0h", "nand", ""])
def test_bad_windows_are_refused(since: str) -> None:
    with pytest.raises(UserError, match="--since"):
        window_seconds(since)


def test_history_reads_earlier_complete_fleet_checks_in_the_window(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.db") as store:
        for figure, started in ((10.0, None), (12.0, None), (3.0, "2020-01-01T00:00:00+00:00")):
            run_id = store.create_run(RunInfo(kind="check", label="fleet", started_at=started or "",
                                              extra={"fleet": {"nodes": [{"hostname": "a", "pair_gb_per_s": figure}]}}))
            store.finish_run(run_id, "complete")
        assert _history(store, "7d", current="none") == {"a": [12.0, 10.0]}


@pytest.mark.parametrize("args", [("--fleet", "--since", "week"), ("--fleet", "--drop-pct", "0"),
                                  ("--fleet", "--rounds", "0"), ("--since", "7d"), ("--hosts", "a,b")])
def test_bad_fleet_options_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    result = run_cli("check", "--db", str(tmp_path / "r.db"), *args)
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_fleet_outside_torchrun_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_cli("check", "--fleet", "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 2 and "torchrun" in result.output


SLOW_NODE, NODES = 2, 4


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this python")
def test_four_loopback_nodes_name_the_slowed_one(tmp_path: Path) -> None:
    db, junit, prom = tmp_path / "r.db", tmp_path / "fleet.xml", tmp_path / "fleet.prom"
    port = _free_port()
    procs = []
    for node in range(NODES):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if node == SLOW_NODE:
            env[SLOW_SEND_ENV] = "0.1"  # this node's sends in the pair rounds wait 0.1 s each
        cmd = [TORCHRUN, "--nnodes", str(NODES), "--nproc-per-node", "1", "--node-rank", str(node),
               "--master-addr", "127.0.0.1", "--master-port", str(port), "--max-restarts", "0",
               "-m", "linkscope", "check", "--fleet", "--quick", "--json", "--db", str(db), "--junit", str(junit),
               "--prometheus", str(prom)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    done = [_finish(p, 600) for p in procs]
    assert done[0].returncode == 1, done[0].stderr[-3000:]  # rank 0's verdict: FAIL
    assert [d.returncode for d in done[1:]] == [0] * (NODES - 1), [d.stderr[-1500:] for d in done[1:]]
    doc = json.loads(done[0].stdout[done[0].stdout.index("{"):])
    verdicts = {n["node"]: n["verdict"] for n in doc["nodes"]}
    pair = {n["node"]: next(i for i in n["items"] if i["name"] == fleet_rules.PAIR_ITEM) for n in doc["nodes"]}
    assert pair[SLOW_NODE]["status"] == "FAIL" and verdicts[SLOW_NODE] == "FAIL"
    assert min(pair, key=lambda n: pair[n]["measured"]) == SLOW_NODE
    slow_name = doc["nodes"][SLOW_NODE]["hostname"]
    assert slow_name.endswith(f":node{SLOW_NODE}") and pair[SLOW_NODE]["fix"].startswith(slow_name)
    assert f'classname="linkscope.check.{slow_name}" name="{fleet_rules.PAIR_ITEM}"><failure' in junit.read_text()
    assert (f'linkscope_check_status{{item="{fleet_rules.PAIR_ITEM}",hostname="{slow_name}",status="FAIL"'
            in prom.read_text())
    with ResultStore(db) as store:
        run = store.get_run(doc["run_id"])
        assert run.status == "complete" and run.nodes == NODES and len(run.hosts) == NODES
        assert run.extra["fleet"]["node_verdicts"][slow_name] == "FAIL"
        assert store.rows(run.run_id)[0].world_size == NODES


@pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed next to this python")
def test_a_node_that_dies_in_the_pair_rounds_is_named_and_the_run_kept(tmp_path: Path) -> None:
    from linkscope.bench.faults import ENV_VAR
    from linkscope.bench.fleet import FAULT_OP

    db, port, procs = tmp_path / "r.db", _free_port(), []
    for node in range(2):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if node == 1:
            env[ENV_VAR] = json.dumps({"action": "exit", "rank": 1, "op": FAULT_OP, "size": 0})
        cmd = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node), "--master-addr",
               "127.0.0.1", "--master-port", str(port), "--max-restarts", "0",
               "-m", "linkscope", "check", "--fleet", "--quick", "--db", str(db)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    node0, _ = _finish(procs[0], 600), _finish(procs[1], 120)
    errors = [line for line in node0.stderr.splitlines() if line.startswith("error:")]
    assert node0.returncode != 0 and errors, node0.stderr[-3000:]
    assert "rank 1 on node1" in errors[0] and "fell behind" in errors[0]
    with ResultStore(db) as store:
        (summary,) = store.list_runs()
        run = store.get_run(summary.run_id)
    assert run.status == "incomplete" and "rank 1 on node1" in (run.error or "")
    assert [n["hostname"] for n in run.extra["fleet"]["nodes"]] == run.hosts  # each node's own items were kept


def test_report_fleet_draws_nodes_by_items_and_history(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with ResultStore(db) as store:
        for figure in (10.0, 2.0):
            nodes = [{"node": 0, "hostname": "gpu-a", "verdict": "PASS", "pair_gb_per_s": 11.0,
                      "items": [{"name": fleet_rules.PAIR_ITEM, "status": "PASS", "measured": 11.0}]},
                     {"node": 1, "hostname": "gpu-b", "verdict": "FAIL", "pair_gb_per_s": figure,
                      "items": [{"name": fleet_rules.PAIR_ITEM, "status": "FAIL", "measured": figure}]}]
            run_id = store.create_run(RunInfo(kind="check", label="fleet", extra={"fleet": {"nodes": nodes}}))
            store.finish_run(run_id, "complete")
    result = run_cli("report", "--fleet", "--db", str(db))
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "nodes x" in text and "gpu-b" in text and "FAIL 2.0" in text
    assert "node-pair bandwidth" in text and "gpu-b │ 2 │ 10" in text.replace("  ", " ")
    assert run_cli("report", "--db", str(db)).exit_code == 2  # run ids are needed without --fleet


def test_the_fleet_is_printed_node_by_node_then_its_own_items(capsys) -> None:  # noqa: ANN001
    from linkscope.check.fleet import FleetResult
    from linkscope.check.items import CheckItem
    from linkscope.cli.check_cmd import _print_fleet

    slow = CheckItem(fleet_rules.PAIR_ITEM, "FAIL", 0.01, 0.8, "GB/s", "median node", "vm:node2 at 1% ...")
    nodes = [{"node": 0, "hostname": "vm:node0", "verdict": "PASS", "items": []},
             {"node": 2, "hostname": "vm:node2", "verdict": "FAIL", "items": [slow.to_dict()]}]
    _print_fleet(FleetResult("FAIL", "abcd1234", "probe/vm",
                             [CheckItem("fleet.nodes", "SKIP", 2, None, "nodes", "--hosts", "no --hosts")], nodes))
    out = capsys.readouterr().out
    assert "FAIL node2 vm:node2" in out and "fleet.pairs.bandwidth" in out and "fleet.nodes" in out
    assert out.rstrip().endswith("verdict: FAIL")
