"""The verdict rules on recorded outputs: an NVLink down, an IB port down or slow, a socket fallback, a slow pair."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from linkscope.check import rules
from linkscope.check.items import CheckItem, Thresholds, verdict
from linkscope.check.junit import junit_xml
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.probe.machine import probe_machine
from linkscope.probe.nccl_findings import Expectations
from linkscope.probe.nccl_log import analyse_nccl_log
from linkscope.probe.to_system import to_system
from linkscope.results.records import CollectiveRow, PairRow
from tests.probe.fixtures import HGX_TREE, fixture_text, h100_smi_runner, tree_paths


def _by_name(items: list[CheckItem]) -> dict[str, CheckItem]:
    return {i.name: i for i in items}


@pytest.fixture(scope="module")
def hgx():
    probe = probe_machine(h100_smi_runner(), tree_paths(), use_nvml=False)
    return probe, to_system(probe).system


def test_thresholds_are_validated() -> None:
    with pytest.raises(UserError):
        Thresholds(75, 90).validated()
    with pytest.raises(UserError):
        Thresholds(120, 75).validated()
    t = Thresholds(90, 75).validated()
    assert [t.status(95), t.status(80), t.status(50)] == ["PASS", "WARN", "FAIL"]


def test_inactive_nvlink_in_recorded_nvidia_smi_fails_the_links_line(hgx) -> None:
    probe, probed = hgx
    expected = load_db().systems["dgx-h100"]
    items = _by_name(rules.nvlink_items(probe, probed, expected))
    assert items["nvlink.links"].status == "FAIL"
    assert "GPU3: 1 down" in items["nvlink.links"].fix
    assert _by_name(rules.gpu_items(probe, probed, expected))["gpus.count"].status == "PASS"


def test_gpu_count_and_model_against_another_offering(hgx) -> None:
    probe, probed = hgx
    other = next(s for s in load_db().systems.values() if s.node.gpu.id != probed.node.gpu.id and not s.is_cpu_host)
    items = _by_name(rules.gpu_items(probe, probed, other))
    assert items["gpus.model"].status == "FAIL" and items["gpus.model"].fix


def test_another_variant_of_the_promised_family_is_named_as_such(hgx) -> None:
    # The recorded machine has H100 SXM5 boards; an offering that promised H100 PCIe cards gets a board of its family.
    probe, probed = hgx
    db = load_db()
    pcie = replace(probed, node=replace(probed.node, gpu=db.gpus["H100-PCIe-80GB"]))
    fix = _by_name(rules.gpu_items(probe, probed, pcie))["gpus.model"].fix
    assert "another H100 variant than promised" in fix
    other = replace(probed, node=replace(probed.node, gpu=db.gpus["A100-SXM4-80GB"]))
    assert "a different GPU model" in _by_name(rules.gpu_items(probe, probed, other))["gpus.model"].fix


def test_topology_mismatch_fails(hgx) -> None:
    _, probed = hgx
    pcie = replace(probed, node=replace(probed.node, scale_up=replace(probed.node.scale_up, kind="pcie")))
    assert rules.topology_item(probed, probed).status == "PASS"
    assert rules.topology_item(pcie, probed).status == "FAIL"


def _tree_with(tmp_path: Path, file: str, text: str) -> Path:
    root = tmp_path / "sysfs"
    shutil.copytree(HGX_TREE, root, symlinks=True)
    (root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / file).write_text(text + "\n")
    return root


def test_recorded_ib_ports_at_rate_pass_and_the_down_spare_is_named(hgx) -> None:
    probe, probed = hgx
    items = _by_name(rules.scale_out_items(probe, probed))
    # The recorded node has mlx5_3 DOWN but enough GPU-local ports active: a warning naming it, not a failure.
    assert items["scale_out.ports"].status == "WARN" and "mlx5_3/1" in items["scale_out.ports"].fix
    assert items["scale_out.rate"].status == "PASS"


def test_scale_out_busbw_is_judged_by_the_users_thresholds(hgx) -> None:
    probe, probed = hgx
    two = probed.with_nodes(2)
    per_gpu = two.node.scale_out_gb_per_s_per_gpu()
    busbw = 0.8 * per_gpu  # 80% of the NIC rate per GPU

    def status(thresholds: Thresholds | None) -> str:
        return _by_name(rules.scale_out_items(probe, two, busbw, thresholds))["scale_out.busbw"].status

    assert status(None) == "WARN"  # the defaults: PASS at 90%, WARN at 75%
    assert status(Thresholds(pass_pct=70.0, warn_pct=50.0)) == "PASS"
    assert status(Thresholds(pass_pct=95.0, warn_pct=85.0)) == "FAIL"


def test_ib_port_down_in_sysfs_fails(tmp_path: Path, hgx) -> None:
    _, probed = hgx
    probe = probe_machine(h100_smi_runner(), tree_paths(_tree_with(tmp_path, "state", "1: DOWN")), use_nvml=False)
    item = _by_name(rules.scale_out_items(probe, probed))["scale_out.ports"]
    assert item.status in ("WARN", "FAIL") and "mlx5_0/1" in item.fix
    four = replace(probed, node=replace(probed.node, scale_out=replace(probed.node.scale_out, nics=4)))
    item = _by_name(rules.scale_out_items(probe, four))["scale_out.ports"]
    assert item.status == "FAIL" and "mlx5_0/1" in item.fix


def test_ib_port_at_wrong_rate_fails(tmp_path: Path, hgx) -> None:
    _, probed = hgx
    probe = probe_machine(h100_smi_runner(), tree_paths(_tree_with(tmp_path, "rate", "200 Gb/sec (4X HDR)")),
                          use_nvml=False)
    item = _by_name(rules.scale_out_items(probe, probed))["scale_out.rate"]
    assert item.status == "FAIL" and "mlx5_0/1" in item.fix and item.measured == 200.0


def test_socket_fallback_in_nccl_log_fails_transport(hgx) -> None:
    _, probed = hgx
    report = analyse_nccl_log(fixture_text("nccl_2node_socket_fallback.log"), Expectations.from_system(probed))
    items = rules.transport_items(report, "")
    assert any(i.status == "FAIL" and "socket" in (i.name + i.fix).lower() for i in items)
    good = analyse_nccl_log(fixture_text("nccl_1node_nvlink.log"), Expectations.from_system(probed))
    assert all(i.status != "FAIL" for i in rules.transport_items(good, ""))
    assert rules.transport_items(None, "gloo")[0].status == "SKIP"


def _pairs(slow: tuple[int, int] | None, world: int = 4) -> list[PairRow]:
    rows = []
    for a in range(world):
        for b in range(world):
            if a != b:
                bw = 40.0 if slow and {a, b} == set(slow) else 100.0
                rows.append(PairRow(a, b, 1 << 20, bw, 2 * bw, 5.0))
    return rows


def test_slow_pair_in_matrix_is_named() -> None:
    item = _by_name(rules.pair_items(_pairs((1, 2)), Thresholds()))["p2p.bandwidth"]
    assert item.status == "FAIL" and "GPU1<->GPU2" in item.fix
    assert _by_name(rules.pair_items(_pairs(None), Thresholds()))["p2p.bandwidth"].status == "PASS"


def _row(op: str, size: int, time_us: float, busbw: float) -> CollectiveRow:
    return CollectiveRow(op, size, size // 4, "float", "sum", 0, "out_of_place", time_us, busbw, busbw, 0)


def test_collectives_against_prediction_use_the_thresholds(hgx) -> None:
    _, probed = hgx
    from linkscope.model.comm.predict import predict_sizes

    pred = {p.bytes: p for p in predict_sizes(probed, "all_reduce", [8, 1 << 30])}
    good = [_row("all_reduce", 8, pred[8].time_us, 0.0), _row("all_reduce", 1 << 30, 1.0, pred[1 << 30].busbw)]
    items = _by_name(rules.collective_items(good, {"all_reduce": pred}, "", Thresholds(), "model"))
    assert items[f"all_reduce.busbw@{1 << 30}B"].status == "PASS"
    assert items["all_reduce.latency@8B"].status == "PASS"
    slow = [_row("all_reduce", 8, pred[8].time_us * 1.2, 0.0),
            _row("all_reduce", 1 << 30, 1.0, pred[1 << 30].busbw * 0.5)]
    items = _by_name(rules.collective_items(slow, {"all_reduce": pred}, "", Thresholds(), "model"))
    assert items[f"all_reduce.busbw@{1 << 30}B"].status == "FAIL"
    assert items["all_reduce.latency@8B"].status == "WARN"
    skipped = rules.collective_items(slow, None, "no model", Thresholds(), "model")
    assert {i.status for i in skipped if i.name != "collective.correctness"} == {"SKIP"}


def test_verdict_and_junit() -> None:
    items = [CheckItem("a", "PASS", 1, 1, "", "s"), CheckItem("b", "FAIL", 0, 1, "", "s", "fix it"),
             CheckItem("c", "SKIP", None, None, "", "s", "why")]
    assert verdict(items) == "FAIL" and verdict(items[::2]) == "PASS"
    xml = junit_xml(items)
    assert "<testsuite" in xml and xml.count("<testcase") == 3 and "<failure" in xml and "<skipped" in xml
