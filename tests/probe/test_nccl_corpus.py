"""The real NCCL/RCCL INFO logs of the corpus (tests/fixtures/corpus/nccl_log, sources in its README) read right:
NCCL 2.4-2.2x and RCCL formats, Ray/CloudWatch/markdown prefixes, and each misread once made on such logs fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.loader import load_db
from linkscope.probe.nccl_findings import Expectations
from linkscope.probe.nccl_log import analyse_nccl_log, read_nccl_log
from tests.cli.helpers import run_cli

LOGS = Path(__file__).parents[1] / "fixtures" / "corpus" / "nccl_log"

# file: (library, version, ranks, nodes, hosts named, channels per transport, worst finding, non-ok finding codes)
EXPECTED = {
    "aws_ofi_715_cloudwatch_prefix_p4d.log": ("NCCL", None, None, None, 1, {"P2P/CUMEM": 9}, "ok", []),
    "deepep_143_h200_2nodes_ib_no_gdrdma.log": ("NCCL", None, None, None, 1, {"P2P/CUMEM": 13, "NET/IB": 4},
                                                "fallback", ["no-gdrdma"]),
    "determined_169_slingshot_cxi_srun_egrep.log": ("NCCL", None, None, None, 1, {}, "warning", ["no-connections"]),
    "fastsafetensors_36_nested_ray_prefix_2nodes.log": ("NCCL", None, 2, 2, 1, {}, "warning", ["no-connections"]),
    "nccl_1189_h20_2nodes_ib_gdrdma.log": ("NCCL", None, None, 2, 2, {"NET/IB": 9, "P2P/CUMEM": 5}, "ok", []),
    "nccl_1597_efa_libfabric_h200.log": ("NCCL", None, None, 2, 2, {}, "warning", ["no-connections"]),
    "nccl_1705_p2p_direct_pointer_h100.log": ("NCCL", None, None, None, 1, {"P2P/direct": 14}, "ok", []),
    "nccl_1814_ib_completion_status12.log": ("NCCL", None, None, None, 1, {}, "error",
                                             ["nccl-warn", "net-completion-error", "no-connections"]),
    "nccl_398_ring_socket_nccl2.4_format.log": ("NCCL", None, None, 2, 2, {"P2P/IPC": 15, "NET/Socket": 2},
                                                "warning", ["socket-transport"]),
    "nccl_622_direct_shared_memory_rows_interleaved.log": ("NCCL", None, None, None, 1, {"SHM": 10}, "warning",
                                                           ["shm-instead-of-p2p"]),
    "nccl_tests_166_shm_two_hosts_named_ubuntu.log": ("NCCL", None, None, None, 1, {"SHM": 16}, "warning",
                                                      ["shm-instead-of-p2p"]),
    "nccl_tests_170_wsl_nccl2.18_socket.log": ("NCCL", "2.18.3", 2, None, 1, {}, "warning",
                                               ["no-connections", "no-rdma-device"]),
    "nccl_tests_252_ib_completion_error_2x4_h100.log": ("NCCL", None, None, 2, 2, {}, "error",
                                                        ["nccl-warn", "net-completion-error", "no-connections"]),
    "ray_59778_comm_suffix_nranks32.log": ("NCCL", None, 32, 2, 2, {"P2P/IPC": 1}, "ok", []),
    "rccl_1026_mi250x_2nodes_socket_comm_suffix.log": ("NCCL", None, 8, 2, 2, {"P2P/IPC": 5, "NET/Socket": 2},
                                                       "warning", ["socket-transport"]),
    "rccl_tests_163_mi50_rsmi_comm_lines.log": ("NCCL", None, 4, 1, 1, {}, "warning", ["no-connections"]),
    "vllm_15769_ray_repeated_15x.log": ("NCCL", None, 8, 1, 1, {}, "warning", ["env-override", "no-connections"]),
    "vllm_2442_rayworker_p2p_ipc_repeated.log": ("NCCL", None, None, None, 1, {"P2P/IPC": 1}, "ok", []),
    "vllm_6407_shm_direct_4xa100.log": ("NCCL", None, None, None, 1, {"SHM": 7, "P2P/IPC": 4}, "warning",
                                        ["nvls-unused", "shm-instead-of-p2p"]),
}


def test_every_corpus_log_has_an_expectation() -> None:
    assert {p.name for p in LOGS.iterdir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_log_is_read_right(name: str) -> None:
    library, version, ranks, nodes, hosts, transports, worst, codes = EXPECTED[name]
    report = read_nccl_log(LOGS / name)
    assert (report.log.library, report.log.version, report.nranks, report.nnodes) == (library, version, ranks, nodes)
    assert (len(report.hosts), report.transports(), report.worst) == (hosts, transports, worst)
    assert sorted({f.code for f in report.findings if f.severity != "ok"}) == codes
    assert not report.log.problems


def test_nccl_2_7_direct_shared_memory_is_the_shm_fallback_where_nvlink_is_promised() -> None:
    report = read_nccl_log(LOGS / "nccl_622_direct_shared_memory_rows_interleaved.log",
                           Expectations.from_system(load_db().systems["dgx-a100"]))
    assert [f.code for f in report.fallbacks] == ["shm-instead-of-p2p"]


def test_a_comm_suffix_is_cut_from_the_transport_and_its_ranks_read() -> None:
    report = read_nccl_log(LOGS / "ray_59778_comm_suffix_nranks32.log")
    assert report.log.connections[0].via == "P2P/IPC" and report.nranks == 32
    rccl = read_nccl_log(LOGS / "rccl_1026_mi250x_2nodes_socket_comm_suffix.log")
    assert {c.path for c in rccl.log.connections} == {"P2P/IPC", "NET/Socket"}


def test_rays_repeated_suffix_stays_out_of_values() -> None:
    report = read_nccl_log(LOGS / "vllm_15769_ray_repeated_15x.log")
    assert [(name, value) for _, name, value in report.log.env] == [("NCCL_P2P_LEVEL", "NVL"),
                                                                    ("NCCL_CUMEM_ENABLE", "0")]
    assert report.log.nvls_support and report.log.comms[0].nranks == 8


def test_hosts_are_counted() -> None:
    report = read_nccl_log(LOGS / "nccl_1189_h20_2nodes_ib_gdrdma.log")
    assert report.hosts == ["H20-GPU-06", "H20-GPU-05"] and report.to_dict()["hosts"] == report.hosts


def test_a_failed_ib_completion_is_an_error_and_fails_the_command() -> None:
    report = read_nccl_log(LOGS / "nccl_1814_ib_completion_status12.log")
    error = report.errors[0]
    assert "12 (transport retry counter exceeded)" in error.message and error.lines == (1, 6, 11)
    result = run_cli("nccl-log", str(LOGS / "nccl_1814_ib_completion_status12.log"), "--fail-on-fallback")
    assert result.exit_code == 1 and "│ error" in result.stdout


@pytest.mark.parametrize("system", ["aws/g5.48xlarge", "aws/g6e.48xlarge"])
def test_no_gpudirect_rdma_is_what_g5_and_g6e_promise(system: str) -> None:
    log = LOGS / "deepep_143_h200_2nodes_ib_no_gdrdma.log"
    report = analyse_nccl_log(log.read_text(), Expectations.from_system(load_db().offerings[system].system))
    assert not report.fallbacks and "no-gdrdma-expected" in [f.code for f in report.findings]
    result = run_cli("nccl-log", str(log), "--system", system, "--fail-on-fallback")
    assert result.exit_code == 0, result.output
    strict = run_cli("nccl-log", str(log), "--system", "aws/p5.48xlarge", "--fail-on-fallback")
    assert strict.exit_code == 1


def test_libfabric_providers_name_the_fabric() -> None:
    cxi = read_nccl_log(LOGS / "determined_169_slingshot_cxi_srun_egrep.log")
    network = next(f for f in cxi.findings if f.code == "network")
    assert "cxi (HPE Slingshot)" in network.message
    efa = read_nccl_log(LOGS / "nccl_1597_efa_libfabric_h200.log")
    assert "efa (AWS EFA)" in next(f for f in efa.findings if f.code == "network").message


def test_escape_codes_are_stripped() -> None:
    # A line of the Ray log above as a terminal shows it: Ray colours its `(RayWorker pid=...)` prefix.
    real = next(line for line in (LOGS / "vllm_2442_rayworker_p2p_ipc_repeated.log").read_text().splitlines()
                if "via P2P/IPC" in line)
    coloured = real.replace("(RayWorker pid=75832)", "\x1b[36m(RayWorker pid=75832)\x1b[0m", 1)
    assert coloured != real
    report = analyse_nccl_log(coloured)
    assert report.transports() == {"P2P/IPC": 1} and report.hosts == ["bms-airtrunk-c-g1v2-app-10-214-144-75"]
