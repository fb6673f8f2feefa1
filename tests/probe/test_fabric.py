"""The NVLink fabric and IMEX domain of a node, from real recorded outputs: a GB200/GB300 NVL72 tray joins a
72-GPU domain; an HGX board, a single card or a tray whose fabric failed has none beyond itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.probe.fabric import SMI_QUERY_XML, ImexReading, parse_fabric, parse_imex_status, read_imex
from linkscope.probe.machine import MachineProbe, probe_machine
from linkscope.probe.records import GpuInfo, HostInfo
from linkscope.probe.runner import CommandResult
from linkscope.probe.smi import NVLINK_COMMAND, QUERY_COMMAND, TOPO_COMMAND
from linkscope.probe.to_system import to_system
from linkscope.probe.topo_matrix import parse_topo_matrix
from tests.probe.fixtures import PROBE_FIXTURES, fixture_text, replay, tree_paths

GB200_TRAY = "smi_qx_gb200_tray.xml"
IMEX_UP = "imex_ctl_p6e_ultraserver.txt"


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _xml(name: str) -> str:
    return (PROBE_FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name, clique", [(GB200_TRAY, 2), ("smi_qx_gb300_tray.xml", 32766)])
def test_a_tray_of_an_nvl72_rack_has_every_gpu_in_one_clique(name: str, clique: int) -> None:
    reading = parse_fabric(_xml(name))
    assert len(reading.gpus) == 4 and reading.reported and reading.in_one_domain and not reading.problems
    assert reading.cliques == {("00000001-0000-0000-0000-000000000001", clique)}
    assert {(g.state, g.status, g.health) for g in reading.gpus} == {("Completed", "Success", "Healthy")}
    assert {g.chassis for g in reading.gpus} == {"1820000000001"}


def test_an_hgx_board_registers_with_no_clique_and_a_single_card_reports_no_fabric() -> None:
    hgx = parse_fabric(_xml("smi_qx_h100_node.xml"))
    assert len(hgx.gpus) == 8 and all(g.registered and not g.in_domain for g in hgx.gpus)
    assert hgx.reported and not hgx.in_one_domain and not hgx.cliques
    t4 = parse_fabric(_xml("smi_qx_t4.xml"))
    assert len(t4.gpus) == 1 and not t4.reported
    old_driver = parse_fabric(fixture_text("smi_q_t4_no_fabric.txt"))
    assert old_driver.gpus == [] and not old_driver.reported and not old_driver.problems


@pytest.mark.parametrize("name, registered, in_domain, health", [
    ("smi_q_fabric_unhealthy.txt", True, True, "Unhealthy"),
    ("smi_q_fabric_insufficient_resources.txt", False, False, None),
    ("smi_q_fabric_in_progress.txt", False, False, None),
])
def test_the_printed_fabric_section_reads_as_the_xml_one(name: str, registered: bool, in_domain: bool,
                                                        health: str | None) -> None:
    (gpu,) = parse_fabric(fixture_text(name)).gpus
    assert (gpu.registered, gpu.in_domain, gpu.health) == (registered, in_domain, health)


def test_the_imex_domain_of_an_ultraserver_is_18_ready_nodes_and_up() -> None:
    imex = parse_imex_status(fixture_text(IMEX_UP))
    assert imex.up and imex.node_count == 18 and imex.domain_state == "UP" and not imex.problems
    assert imex.nodes[17].address == "172.31.56.47"


def test_a_node_that_lost_its_peers_is_not_up() -> None:
    text = fixture_text(IMEX_UP).replace("Node #5   - 172.31.50.44    - READY", "Node #5   - 172.31.50.44    - DOWN")
    text = re.sub(r"(\n       5        C   C)   C", r"\1   D", text).replace("Domain State: UP", "Domain State: DOWN")
    imex = parse_imex_status(text)
    assert not imex.up and imex.unconnected == [(5, 2, "D")] and imex.domain_state == "DOWN"


def test_imex_files_count_the_domain_when_the_tool_is_missing(tmp_path: Path) -> None:
    config = tmp_path / "nodes_config.cfg"
    config.write_text("# IMEX nodes\n" + "\n".join(f"10.0.0.{i}" for i in range(18)) + "\n", encoding="utf-8")
    channels = tmp_path / "channels"
    channels.mkdir()
    (channels / "channel0").write_text("", encoding="utf-8")
    imex = read_imex(replay({}), config, channels)
    assert (imex.source, imex.node_count, imex.channels, imex.up) == ("files", 18, ["channel0"], False)
    assert imex.errors == ["`nvidia-imex-ctl` not found"]


def _tray(fabric: str, imex: ImexReading | None) -> MachineProbe:
    reading = parse_fabric(_xml(fabric) if fabric.endswith(".xml") else fixture_text(fabric))
    gpus = [GpuInfo(index=i, name="NVIDIA GB200", uuid=g.uuid, pci_bus_id=g.gpu) for i, g in
            enumerate(parse_fabric(_xml(GB200_TRAY)).gpus)]
    return MachineProbe(host=HostInfo(hostname="tray4", cpu_vendor="arm", cpu_sockets=2), gpu_source="nvidia-smi",
                        gpus=gpus, topo=parse_topo_matrix(fixture_text("topo_gb200_tray.txt")), fabric=reading,
                        imex=imex)


def test_topo_on_a_tray_sets_the_domain_from_the_imex_nodes(db: HardwareDB) -> None:
    result = to_system(_tray(GB200_TRAY, parse_imex_status(fixture_text(IMEX_UP))), db)
    system = result.system
    assert system is not None
    assert (system.gpus_per_node, system.nvlink_domain_gpus, system.domain_spans_nodes) == (4, 72, True)
    assert any("clique 2" in n and "18 nodes in the IMEX domain" in n for n in result.notes)


def test_without_imex_the_rack_size_of_the_presets_is_assumed_and_said(db: HardwareDB) -> None:
    result = to_system(_tray(GB200_TRAY, ImexReading()), db)
    assert result.system is not None and result.system.nvlink_domain_gpus == 72
    assert any("72-GPU rack of the B200 presets is assumed" in n for n in result.notes)


def test_a_tray_whose_fabric_failed_has_no_domain_beyond_itself(db: HardwareDB) -> None:
    probe = _tray(GB200_TRAY, parse_imex_status(fixture_text(IMEX_UP)))
    probe.fabric = parse_fabric(_xml(GB200_TRAY).replace("<status>Success</status>",
                                                         "<status>Insufficient Resources</status>", 1))
    result = to_system(probe, db)
    assert result.system is not None and result.system.nvlink_domain_gpus == 4
    assert not result.system.domain_spans_nodes
    assert any("has not joined every GPU into one clique" in n for n in result.notes)


def test_the_probe_reads_the_fabric_and_an_hgx_node_keeps_its_own_domain(db: HardwareDB) -> None:
    runner = replay({QUERY_COMMAND: fixture_text("query_gpu_h100_8gpu.csv"),
                     NVLINK_COMMAND: fixture_text("nvlink_h100_8gpu.txt"),
                     TOPO_COMMAND: fixture_text("topo_hgx_h100.txt"),
                     SMI_QUERY_XML: _xml("smi_qx_h100_node.xml")})
    probe = probe_machine(runner=runner, paths=tree_paths(), use_nvml=False)
    assert probe.fabric is not None and len(probe.fabric.gpus) == 8 and not probe.fabric.in_one_domain
    assert probe.imex is not None and probe.imex.source == "none"
    doc = probe.to_dict()
    assert doc["fabric"]["in_one_domain"] is False and doc["imex"]["up"] is False
    system = to_system(probe, db).system
    assert system is not None and system.nvlink_domain_gpus == 8 and not system.domain_spans_nodes


def test_a_failing_nvidia_smi_query_leaves_a_note_not_an_error() -> None:
    def runner(args: object) -> CommandResult:
        argv = tuple(args)  # type: ignore[arg-type]
        if argv == SMI_QUERY_XML:
            return CommandResult(argv, 6, "", "Failed to initialize NVML")
        return replay({QUERY_COMMAND: fixture_text("query_gpu_h100_8gpu.csv")})(argv)

    probe = probe_machine(runner=runner, paths=tree_paths(), use_nvml=False)
    assert probe.fabric is None and any(n.startswith("fabric state not read") for n in probe.notes)


@pytest.mark.parametrize("text", ["", "\x00\x01\xff" * 100, "<nvidia_smi_log><gpu id=\"x\"><fabric><cliqueId>"
                                  "99999999999999999999</cliqueId><state>Completed</state>", "Fabric\n" * 10_000,
                                  "<!DOCTYPE x [<!ENTITY a \"aaaa\">]><nvidia_smi_log>&a;&a;</nvidia_smi_log>"])
def test_hostile_fabric_output_is_read_without_a_traceback(text: str) -> None:
    reading = parse_fabric(text)
    assert not reading.in_one_domain
    assert all(g.clique_id is None or g.clique_id < 2**40 for g in reading.gpus)
