"""Single NCCL INFO lines: every sample line of the reference, old and new formats, and malformed lines."""

from __future__ import annotations

import pytest

from linkscope.probe.nccl_lines import ParsedLog, classify_via, parse_log
from tests.probe.fixtures import PROBE_FIXTURES


@pytest.fixture(scope="module")
def samples() -> ParsedLog:
    return parse_log((PROBE_FIXTURES / "nccl_samples.log").read_text(encoding="utf-8"))


def test_every_sample_line_is_read_without_problems(samples: ParsedLog) -> None:
    assert samples.problems == []
    assert samples.nccl_lines == 20
    assert [c.path for c in samples.connections] == [
        "P2P/CUMEM", "P2P/IPC", "P2P/direct", "SHM", "NET/IB", "NET/IB", "NET/IB", "NET/IBext_v8", "NET/Socket",
        "NET/Socket"]


def test_p2p_and_shm_details(samples: ParsedLog) -> None:
    cumem, ipc, direct, shm = samples.connections[:4]
    assert (cumem.channel, cumem.sub_channel, cumem.src_rank, cumem.dst_rank, cumem.read) == (4, 0, 0, 7, False)
    assert ipc.read and (ipc.src_rank, ipc.dst_rank) == (8, 15)
    assert direct.host == "hw14" and direct.via == "P2P/direct pointer"
    assert shm.sub_channel is None and shm.via == "SHM/direct/direct" and shm.host == "ubuntu"


def test_net_lines_old_and_new_formats(samples: ParsedLog) -> None:
    h20, old, no_gdr, plugin, socket, cluster = samples.connections[4:]
    assert (h20.direction, h20.net_device, h20.gdrdma, h20.host) == ("receive", 3, True, None)
    assert (old.channel, old.sub_channel, old.src_rank, old.dst_rank, old.gdrdma) == (3, None, 7, 14, True)
    assert (no_gdr.net_device, no_gdr.gdrdma, no_gdr.direction) == (4, False, "send")
    assert plugin.transport == "NET" and plugin.net_device == 1
    assert (socket.host, socket.direction, socket.net_device) == ("ubuntu", "send", 0)
    assert cluster.host == "<cluster>" and cluster.net_device == 3


def test_network_selection_lines(samples: ParsedLog) -> None:
    assert samples.no_device == [(24, "IB")]
    assert samples.networks == [(30, "IB")]
    devices = [(d.net, d.name, d.port, d.link_layer, d.sharp) for d in samples.net_devices]
    assert devices == [("Socket", "ens3", None, None, False), ("IB", "mlx5_0", 1, "IB", False),
                       ("IB", "mlx5_0", 1, "IB", True), ("IB", "mlx5_0", 1, "RoCE", False),
                       ("IB", "mlx5_1", 1, "RoCE", False)]


def test_rings_nvls_and_graph_lines(samples: ParsedLog) -> None:
    assert samples.rings == [(36, 0, 0)]
    assert samples.nvls_support == [(38, False)]
    assert samples.nvls_comm_lines == [40]
    assert samples.graph_bw_gb_per_s == [(42, 24.0, 24.0)]


def test_version_comm_env_and_channel_summary_lines() -> None:
    text = "\n".join([
        "hw14:798:798 [0] NCCL INFO NCCL version 2.18.3+cuda12.2",
        "hw14:798:813 [0] NCCL INFO comm 0x5581c0a0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
        "hw14:798:813 [0] NCCL INFO ncclCommInitRank comm 0x55d6 rank 3 nranks 8 cudaDev 3 busId 3d000 - Init OK",
        "hw14:798:813 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
        "hw14:798:813 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC",
        "hw14:798:813 [0] NCCL INFO 32 coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels, "
        "32 p2p channels per peer",
    ])
    log = parse_log(text)
    assert (log.version, log.cuda_version) == ("2.18.3", "12.2")
    new, old = log.comms
    assert (new.rank, new.nranks, new.nnodes, new.local_ranks, new.local_rank, new.host) == (0, 16, 2, 8, 0, "hw14")
    assert (old.rank, old.nranks, old.nnodes) == (3, 8, None)
    assert log.env == [(4, "NCCL_IB_DISABLE", "1"), (5, "NCCL_P2P_LEVEL", "LOC")]
    assert log.channel_counts == [(6, {"coll": 32, "collnet": 0, "nvls": 0, "p2p": 32, "p2p_per_peer": 32})]


def test_ring_order_lines_are_not_connections() -> None:
    log = parse_log("h:1:2 [0] NCCL INFO Channel 00/24 :    0   1   2   3   4   5   6   7\n"
                    "h:1:2 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1\n")
    assert log.connections == [] and log.problems == []


def test_pxn_proxy_rank_collnet_and_launcher_prefixes() -> None:
    log = parse_log("[rank3]: n1:77:80 [3] NCCL INFO Channel 02/1 : 3[3] -> 11[3] [send] via NET/IB/0(4)/GDRDMA\n"
                    "n1:77:80 [3] NCCL INFO CollNet 01/0 : 3 [send] via COLLNET/IBext_v8/0/GDRDMA\n")
    conn = log.connections[0]
    assert (conn.proxy_rank, conn.gdrdma, conn.host, conn.sub_channel) == (4, True, "n1", 1)
    assert [(c.path, c.src_rank, c.gdrdma) for c in log.collnet] == [("COLLNET/IBext_v8", 3, True)]


def test_malformed_nccl_lines_are_problems_with_line_numbers() -> None:
    text = "\n".join([
        "not an nccl line at all",
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> via P2P/CUMEM",
        "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via WARP/9",
        "h:1:2 [0] NCCL INFO NET/IB : Using ???",
        "h:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with error 12",
    ])
    log = parse_log(text)
    assert [(p.line, p.message) for p in log.problems] == [
        (2, "connection line not understood"), (3, "unknown transport 'WARP/9'"),
        (4, "network device list not understood")]
    assert log.warns == [(5, "NET/IB : Got completion from peer 10.0.0.2<1234> with error 12")]
    assert log.lines_total == 5 and log.nccl_lines == 4


def test_classify_via_names_the_p2p_modes() -> None:
    assert classify_via("P2P/CUMEM/read/CE")[:2] == ("P2P/CUMEM", {"read": True})
    assert classify_via("P2P/indirect/2[2]/read")[0] == "P2P/indirect"
    assert classify_via("P2P/MNNVL")[0] == "P2P/MNNVL"
    assert classify_via("NET/AWS Libfabric/0/GDRDMA")[:2] == (
        "NET/AWS Libfabric", {"gdrdma": True, "net_device": 0, "proxy_rank": None})
