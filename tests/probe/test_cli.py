"""`linkscope topo` and `linkscope nccl-log` through the command line (a fresh app with only these commands)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner, Result

from linkscope.cli import probe_cmd
from linkscope.probe.machine import MachineProbe, probe_machine
from tests.probe.fixtures import PROBE_FIXTURES, h100_smi_runner, tree_paths

SOCKET_LOG = str(PROBE_FIXTURES / "nccl_2node_socket_fallback.log")


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tables wrap at the runner's default 80 columns; a wide console keeps cell text on one line.
    monkeypatch.setattr(probe_cmd, "console", Console(width=240))


def run(*args: str) -> Result:
    app = typer.Typer()
    probe_cmd.register(app)
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def hgx_probe(monkeypatch: pytest.MonkeyPatch) -> MachineProbe:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    monkeypatch.setattr("linkscope.probe.machine.probe_machine", lambda: probe)
    return probe


def test_topo_on_this_machine_gives_valid_json() -> None:
    result = run("topo", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert set(data) == {"probe", "system", "reason", "notes"}
    if not data["probe"]["gpus"]:
        assert data["system"]["gpu"] == "CPU" and data["system"]["scale_up"]["kind"] == "host"
        assert data["notes"][0].startswith("no NVIDIA GPU found")


def test_topo_json_of_an_hgx_node(hgx_probe: MachineProbe) -> None:
    data = json.loads(run("topo", "--json").stdout)
    assert data["system"]["scale_up"]["kind"] == "nvswitch"
    assert data["system"]["scale_out"]["fabric"] == "infiniband"
    assert data["probe"]["gpu_source"] == "nvidia-smi"


def test_topo_tables_of_an_hgx_node(hgx_probe: MachineProbe) -> None:
    result = run("topo")
    assert result.exit_code == 0
    for text in ("NVIDIA H100 80GB HBM3", "NV18", "400 Gb/sec (4X NDR)", "nvswitch", "mlx5_0"):
        assert text in result.stdout


def test_topo_tables_without_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    from linkscope.probe.records import HostInfo

    monkeypatch.setattr("linkscope.probe.machine.probe_machine", lambda: MachineProbe(host=HostInfo(hostname="cpu-box"),
                                                                         notes=["NVML: not installed"]))
    result = run("topo")
    assert result.exit_code == 0
    assert "no GPU found" in result.stdout and "cpu-box: CPU only" in result.stdout


def test_nccl_log_table_and_expectations() -> None:
    plain = run("nccl-log", SOCKET_LOG)
    assert plain.exit_code == 0 and "NET/Socket x2" in plain.stdout
    assert "│ warning" in plain.stdout and "│ fallback" not in plain.stdout
    strict = run("nccl-log", SOCKET_LOG, "--expect-nvlink", "--expect-ib")
    assert "│ fallback" in strict.stdout


def test_nccl_log_takes_expectations_from_a_system_and_can_fail() -> None:
    result = run("nccl-log", SOCKET_LOG, "--system", "dgx-h100", "--fail-on-fallback")
    assert result.exit_code == 1
    relaxed = run("nccl-log", SOCKET_LOG, "--system", "dgx-h100", "--no-expect-nvls", "--json")
    data = json.loads(relaxed.stdout)
    assert data["expectations"] == {"nvlink": True, "ib": True, "nvls": False, "mnnvl": None, "gdr": True}
    assert "nvls-unavailable" in [f["code"] for f in data["findings"] if f["severity"] == "ok"]


def test_nccl_log_user_errors_are_one_line_with_exit_2() -> None:
    missing = run("nccl-log", str(PROBE_FIXTURES / "no-such.log"))
    assert missing.exit_code == 2 and "no-such.log: no such file" in missing.stderr
    unknown = run("nccl-log", SOCKET_LOG, "--system", "dgx-h1000")
    assert unknown.exit_code == 2 and "unknown System" in unknown.stderr


@pytest.mark.parametrize("extra", [[], ["--fail-on-fallback"]])
def test_a_file_without_nccl_lines_is_an_error_not_a_pass(tmp_path: Path, extra: list[str]) -> None:
    log = tmp_path / "train.log"
    log.write_text("epoch 1 loss 2.3\nepoch 2 loss 1.9\n", encoding="utf-8")
    result = run("nccl-log", str(log), *extra)
    assert result.exit_code == 2
    assert "no NCCL INFO lines found" in result.stderr and len(result.stderr.strip().splitlines()) == 1
