"""NVLink across the trays of one NVLink domain (NCCL's MNNVL) in NCCL logs: the fabric registration, MNNVL on or
off, NVLS across hosts, and the silent fallback of tray-to-tray traffic to the NICs."""

from __future__ import annotations

from linkscope.hardware.loader import load_db
from linkscope.probe.nccl_findings import Expectations
from linkscope.probe.nccl_lines import parse_log
from linkscope.probe.nccl_log import NcclLogReport, analyse_nccl_log, read_nccl_log
from tests.cli.helpers import run_cli
from tests.probe.fixtures import PROBE_FIXTURES

RACK = Expectations.from_system(load_db(include_user=False).systems["gb200-nvl72"])


def _codes(report: NcclLogReport) -> dict[str, str]:
    return {f.code: f.severity for f in report.findings}


def test_a_gb200_system_expects_nvlink_across_its_trays() -> None:
    assert RACK.mnnvl is True
    assert Expectations.from_system(load_db(include_user=False).systems["dgx-h100"]).mnnvl is None


def test_the_fabric_registration_of_a_gb200_tray_is_read() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_gb200_mnnvl_fabric.log", RACK)
    fabric = report.log.mnnvl_fabric
    assert len(fabric) == 4 and {(f.state, f.clique_id, f.health_mask) for f in fabric} == {(3, 0x7FFE, 0xAA)}
    assert {f.fabric_uuid for f in fabric} == {"3143b15bc2cd192b.28cc9b5473fb5b93"}
    assert _codes(report)["mnnvl-fabric"] == "ok" and "mnnvl-fallback" not in _codes(report)
    assert report.mnnvl().enabled is None and report.to_dict()["mnnvl"]["hosts"] == 1


def test_mnnvl_0_between_two_hosts_is_a_fallback_where_a_domain_spans_them() -> None:
    log = PROBE_FIXTURES / "nccl_gh200_2node_mnnvl0.log"
    rack = read_nccl_log(log, RACK)
    assert rack.mnnvl().enabled is False and _codes(rack)["mnnvl-fallback"] == "fallback"
    fallback = next(f for f in rack.findings if f.code == "mnnvl-fallback")
    assert "MNNVL 0" in fallback.message and "nvidia-imex-ctl -N" in fallback.message and fallback.lines == (16, 17)
    # GH200 nodes joined by InfiniBand alone: no NVLink domain is expected, so nothing to flag.
    assert "mnnvl-fallback" not in _codes(read_nccl_log(log, Expectations(ib=True, mnnvl=False)))


def test_host_pairs_over_the_network_are_named_when_a_domain_should_join_them() -> None:
    report = read_nccl_log(PROBE_FIXTURES / "nccl_2node_roce_no_gdr.log", RACK)
    fallback = next(f for f in report.findings if f.code == "mnnvl-fallback")
    assert "2 rank pairs between trays of the NVLink domain go through the network (7->8, 15->0)" in fallback.message
    assert len(report.mnnvl().pairs_over_net) == 2


# NCCL's own format strings (src/mnnvl.cc, src/init.cc, src/transport/p2p.cc), filled in for 2 trays of 4 GPUs.
_MNNVL_ON = """\
trayA:11:21 [0] NCCL INFO MNNVL busId 0x801000 fabric UUID 3143b15bc2cd192b.28cc9b5473fb5b93 cliqueId 0x7ffe \
state 3 healthMask 0xaa
trayA:11:21 [0] NCCL INFO MNNVL 1 cliqueId 7ffe cliqueSize 8 cliqueRank 0 nvlDomainSize 8
trayA:11:21 [0] NCCL INFO comm 0xaaaa rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 1
trayB:12:22 [0] NCCL INFO comm 0xbbbb rank 4 nRanks 8 nNodes 1 localRanks 8 localRank 4 MNNVL 1
trayA:11:21 [3] NCCL INFO Channel 00 : 3[3] -> 4[0] via P2P/MNNVL
trayB:12:22 [3] NCCL INFO Channel 00 : 7[3] -> 0[0] via P2P/MNNVL
trayA:11:21 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/CUMEM
trayA:11:21 [0] NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls channels, 32 p2p channels, \
32 p2p channels per peer
"""


def test_mnnvl_on_with_nvls_across_trays_is_reported_as_intended() -> None:
    log = parse_log(_MNNVL_ON)
    assert [(c.enabled, c.clique_size, c.domain_size) for c in log.mnnvl_cliques] == [(True, 8, 8)]
    report = analyse_nccl_log(_MNNVL_ON, RACK)
    m = report.mnnvl()
    assert (m.enabled, m.clique_size, m.pairs_over_nvlink, m.nvls_across_hosts) == (True, 8, 2, True)
    assert report.worst != "fallback" and _codes(report)["mnnvl"] == "ok"
    assert next(p for p in report.pairs if p.src_rank == 3).same_host is False


def test_the_mnnvl_warning_of_a_missing_imex_channel_is_a_fallback_with_the_fix() -> None:
    text = ("trayA:11:21 [0] NCCL WARN MNNVL (cliqueSize 72) is available but not working on this system. Check the "
            "IMEX channel configuration (/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this "
            "issue.\n")
    finding = next(f for f in analyse_nccl_log(text, RACK).findings if f.code == "mnnvl-not-working")
    assert finding.severity == "fallback" and "IMEX channel" in finding.message and finding.lines == (1,)


def test_nccl_log_on_the_command_line_reports_the_domain() -> None:
    result = run_cli("nccl-log", str(PROBE_FIXTURES / "nccl_gh200_2node_mnnvl0.log"), "--system", "gb200-nvl72",
                     "--fail-on-fallback")
    assert result.exit_code == 1
    assert "NVLink across hosts (MNNVL): off" in " ".join(result.stdout.split())
