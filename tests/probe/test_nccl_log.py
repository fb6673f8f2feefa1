"""Whole logs: transports per pair of ranks and the fallback verdicts, with and without expectations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.probe.nccl_findings import Expectations
from linkscope.probe.nccl_log import NcclLogReport, analyse_nccl_log, read_nccl_log
from tests.probe.fixtures import PROBE_FIXTURES

ALL_EXPECTED = Expectations(nvlink=True, ib=True, nvls=True, gdr=True)


def _codes(report: NcclLogReport, severity: str) -> list[str]:
    return [f.code for f in report.findings if f.severity == severity]


def test_single_node_nvlink_run_is_all_ok() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_1node_nvlink.log", ALL_EXPECTED)
    assert report.worst == "ok"
    assert (report.log.version, report.nranks, report.nnodes) == ("2.19.3", 8, 1)
    assert report.transports() == {"P2P/direct": 16}
    assert len(report.pairs) == 8 and all(p.same_host for p in report.pairs)
    assert _codes(report, "ok") == ["nvls", "p2p"]


def test_disabled_p2p_and_ib_are_fallbacks_when_the_machine_has_them() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_2node_socket_fallback.log", ALL_EXPECTED)
    assert report.worst == "fallback"
    assert _codes(report, "fallback") == ["shm-instead-of-p2p", "socket-transport", "nvls-unavailable"]
    assert _codes(report, "warning") == ["env-override", "env-override"]
    assert report.transports() == {"SHM": 28, "NET/Socket": 4}


def test_without_expectations_the_same_log_gives_warnings() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_2node_socket_fallback.log")
    assert report.fallbacks == []
    assert _codes(report, "warning") == ["shm-instead-of-p2p", "socket-transport", "nvls-unavailable",
                                         "env-override", "env-override"]


def test_host_names_shared_by_both_nodes_are_not_trusted() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_2node_socket_fallback.log")
    socket_pair = next(p for p in report.pairs if (p.src_rank, p.dst_rank) == (7, 8))
    assert socket_pair.channels_by_path == {"NET/Socket": 2} and socket_pair.same_host is None
    assert "net-inside-node" not in [f.code for f in report.findings]


def test_roce_without_gpudirect_rdma() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_2node_roce_no_gdr.log", ALL_EXPECTED)
    assert _codes(report, "fallback") == ["no-gdrdma", "gdr-disabled"]
    pair = next(p for p in report.pairs if (p.src_rank, p.dst_rank) == (7, 8))
    assert (pair.net_channels, pair.gdrdma_channels, pair.same_host) == (2, 0, False)
    network = next(f for f in report.findings if f.code == "network")
    assert network.message == "network: IB; devices mlx5_0:1/RoCE, mlx5_1:1/RoCE"


def test_reference_samples_flag_socket_despite_listed_ib_devices() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_samples.log")
    fallbacks = {f.code: f for f in report.fallbacks}
    assert set(fallbacks) == {"socket-transport", "no-gdrdma", "gdr-disabled"}
    assert fallbacks["socket-transport"].lines == (20, 22)
    assert fallbacks["no-gdrdma"].lines == (16, 18)
    assert "no-rdma-device" in _codes(report, "warning")


def test_net_between_ranks_of_one_host_is_a_fallback() -> None:
    text = ("gpu-a:10:11 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n"
            "gpu-a:12:13 [1] NCCL INFO comm 0x1 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0\n"
            "gpu-a:10:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n")
    report = analyse_nccl_log(text, Expectations(nvlink=True))
    assert _codes(report, "fallback") == ["net-inside-node"]


def test_benign_environment_settings_are_listed_as_ok() -> None:
    report = analyse_nccl_log("h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n")
    env = next(f for f in report.findings if f.code == "env-settings")
    assert env.severity == "ok" and env.message == "set by environment: NCCL_SOCKET_IFNAME=eth0"


def test_empty_and_non_nccl_text_say_what_is_missing() -> None:
    assert [f.code for f in analyse_nccl_log("").findings] == ["no-nccl-lines"]
    report = analyse_nccl_log("h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    assert [f.code for f in report.findings] == ["no-connections"]


def test_expectations_of_presets() -> None:
    db = load_db(include_user=False)
    assert Expectations.from_system(db.systems["dgx-h100"]) == ALL_EXPECTED
    assert Expectations.from_system(db.systems["dgx-a100"]) == Expectations(nvlink=True, ib=True, nvls=False, gdr=True)


def test_json_form_is_serialisable_and_complete() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_2node_roce_no_gdr.log")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["nccl_version"] == "2.21.5" and data["nnodes"] == 2 and data["worst"] == "fallback"
    assert data["transports"] == {"P2P/CUMEM": 28, "NET/IB": 4}
    assert data["rings"] == [{"line": 48, "pxn": 0, "gdr": 0}]
    assert data["pairs"][0]["channels_by_path"] == {"P2P/CUMEM": 2}
    assert {"severity", "code", "message", "lines"} == set(data["findings"][0])


def test_unreadable_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="missing.log: no such file"):
        read_nccl_log(tmp_path / "missing.log")
