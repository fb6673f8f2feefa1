"""`check` against a GB200 NVL72 offering: this tray's GPUs in one clique of the fabric, the IMEX domain up with a
channel, MNNVL in NCCL's log; `check --fleet` names a tray that fell back to the NIC and groups nodes per rack."""

from __future__ import annotations

import pytest

from linkscope.check import fleet_rules, rules
from linkscope.check.fleet import FleetResult, _domain_link_item
from linkscope.check.items import CheckItem, Thresholds
from linkscope.hardware.loader import load_db
from linkscope.hardware.system import System
from linkscope.probe.fabric import ImexReading, parse_fabric, parse_imex_status
from linkscope.probe.machine import MachineProbe
from linkscope.probe.nccl_findings import Expectations
from linkscope.probe.nccl_log import analyse_nccl_log
from linkscope.probe.records import HostInfo
from tests.probe.fixtures import PROBE_FIXTURES, fixture_text


@pytest.fixture(scope="module")
def rack() -> System:
    return load_db(include_user=False).offerings["coreweave/gb200-4x"].system


def _probe(fabric: str, imex: ImexReading | None) -> MachineProbe:
    text = (PROBE_FIXTURES / fabric).read_text(encoding="utf-8") if fabric.endswith(".xml") else fixture_text(fabric)
    return MachineProbe(host=HostInfo(hostname="tray"), fabric=parse_fabric(text), imex=imex)


def _up(channels: tuple[str, ...] = ("channel0",)) -> ImexReading:
    imex = parse_imex_status(fixture_text("imex_ctl_p6e_ultraserver.txt"))
    imex.channels = list(channels)
    return imex


def _by_name(items: list[CheckItem]) -> dict[str, CheckItem]:
    return {i.name: i for i in items}


def test_a_healthy_tray_in_an_up_imex_domain_passes(rack: System) -> None:
    items = _by_name(rules.fabric_items(_probe("smi_qx_gb200_tray.xml", _up()), rack))
    assert {n: i.status for n, i in items.items()} == {"fabric.clique": "PASS", "imex.domain": "PASS",
                                                        "imex.channel": "PASS"}
    assert items["fabric.clique"].measured == "clique 2 of 00000001-0000-0000-0000-000000000001, Completed/Success"
    assert items["imex.domain"].measured == "UP, 18 nodes READY"


@pytest.mark.parametrize("fabric, status, fix", [
    ("smi_q_fabric_insufficient_resources.txt", "FAIL", "fabric manager"),
    ("smi_q_fabric_in_progress.txt", "FAIL", "fabric manager"),
    ("smi_q_t4_no_fabric.txt", "FAIL", "no Fabric state reported"),
    ("smi_q_fabric_unhealthy.txt", "WARN", "fabric health Unhealthy"),
])
def test_a_tray_cut_off_from_its_fabric_is_named_with_the_fix(rack: System, fabric: str, status: str,
                                                              fix: str) -> None:
    item = _by_name(rules.fabric_items(_probe(fabric, _up()), rack))["fabric.clique"]
    assert item.status == status and fix in item.fix


def test_imex_down_or_missing_and_no_channel_fail_with_the_fix(rack: System) -> None:
    down = parse_imex_status(fixture_text("imex_ctl_p6e_ultraserver.txt").replace(
        "Node #5   - 172.31.50.44    - READY", "Node #5   - 172.31.50.44    - DOWN").replace("UP", "DOWN"))
    items = _by_name(rules.fabric_items(_probe("smi_qx_gb200_tray.xml", down), rack))
    assert items["imex.domain"].status == "FAIL" and "node 5 (172.31.50.44) DOWN" in items["imex.domain"].fix
    assert items["imex.channel"].status == "FAIL" and "mknod" in items["imex.channel"].fix
    missing = _by_name(rules.fabric_items(_probe("smi_qx_gb200_tray.xml", ImexReading()), rack))
    assert missing["imex.domain"].status == "FAIL" and "nvidia-imex service" in missing["imex.domain"].fix


def test_an_hgx_node_has_no_fabric_items(rack: System) -> None:
    hgx = load_db(include_user=False).systems["dgx-h100"]
    assert rules.fabric_items(_probe("smi_qx_h100_node.xml", None), hgx) == []


def test_mnnvl_off_in_the_runs_nccl_log_fails_the_transport_with_the_fix(rack: System) -> None:
    report = analyse_nccl_log(fixture_text("nccl_gh200_2node_mnnvl0.log"), Expectations.from_system(rack))
    items = _by_name(rules.transport_items(report, ""))
    assert items["transport.mnnvl-fallback"].status == "FAIL"
    assert "nvidia-imex-ctl -N" in items["transport.mnnvl-fallback"].fix


def test_a_tray_at_nic_speed_to_its_own_rack_fell_back_to_the_nic(rack: System) -> None:
    size = 64 << 20
    # An InfiniBand rate for the tray's NICs (CoreWeave's is not stated), so the NIC figure exists.
    priced = load_db(include_user=False).systems["gb200-nvl72"]
    fast = _domain_link_item(priced, 620.0, size, Thresholds())
    assert fast.status == "PASS" and fast.name == fleet_rules.DOMAIN_ITEM
    slow = _domain_link_item(priced, 45.0, size, Thresholds())
    assert slow.status == "FAIL" and "fell back to the NIC" in slow.fix and "IMEX channel" in slow.fix


def test_nodes_are_grouped_per_rack_and_only_same_rack_pairs_judge_nvlink() -> None:
    nodes = [{"node": 0, "hostname": "a", "verdict": "PASS", "nvlink_domain": "u1/2"},
             {"node": 1, "hostname": "b", "verdict": "FAIL", "nvlink_domain": "u1/2"},
             {"node": 2, "hostname": "c", "verdict": "PASS", "nvlink_domain": "u2/7"},
             {"node": 3, "hostname": "d", "verdict": "PASS", "nvlink_domain": None}]
    racks = fleet_rules.racks(nodes)
    assert [(r["nvlink_domain"], r["hosts"], r["verdict"]) for r in racks] == [
        ("u1/2", ["a", "b"], "FAIL"), ("u2/7", ["c"], "PASS"), (fleet_rules.NO_DOMAIN, ["d"], "PASS")]
    pairs = [{"round": 0, "node_a": 0, "node_b": 1, "gb_per_s": 300.0},
             {"round": 0, "node_a": 2, "node_b": 3, "gb_per_s": 40.0},
             {"round": 1, "node_a": 0, "node_b": 2, "gb_per_s": 40.0}]
    same = fleet_rules.same_domain_pairs(pairs, [n["nvlink_domain"] for n in nodes])
    assert same == [pairs[0]]


def test_the_fleet_prints_each_rack_with_its_nodes(capsys) -> None:  # noqa: ANN001
    from linkscope.cli.check_cmd import _print_fleet

    nodes = [{"node": 0, "hostname": "a", "verdict": "PASS", "items": [], "nvlink_domain": "u1/2"},
             {"node": 1, "hostname": "b", "verdict": "PASS", "items": [], "nvlink_domain": "u1/2"}]
    _print_fleet(FleetResult("PASS", "abcd1234", "coreweave/gb200-4x", [], nodes, fleet_rules.racks(nodes)))
    out = capsys.readouterr().out
    assert "PASS NVLink domain u1/2: 2 node(s)" in out and "  PASS node1 b" in out
