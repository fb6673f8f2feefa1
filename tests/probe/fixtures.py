"""Shared by the probe tests: the recorded fixtures and a command runner that replays them."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence

from linkscope.probe.host import HostPaths
from linkscope.probe.machine import ProbePaths
from linkscope.probe.runner import NOT_FOUND, CommandResult, CommandRunner
from linkscope.probe.smi import NVLINK_COMMAND, QUERY_COMMAND, TOPO_COMMAND

PROBE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"
HGX_TREE = PROBE_FIXTURES / "sysfs_hgx"


def fixture_text(name: str) -> str:
    """A fixture's text with its leading `#` provenance comment blanked, so line numbers stay those of the file."""
    lines = (PROBE_FIXTURES / name).read_text(encoding="utf-8").splitlines()
    header = 0
    while header < len(lines) and lines[header].startswith("#"):
        header += 1
    return "\n".join([""] * header + lines[header:]) + "\n"


def tree_paths(root: Path = HGX_TREE) -> ProbePaths:
    """ProbePaths pointing every sysfs and procfs read at a fixture tree."""
    host = HostPaths(cpuinfo=root / "proc" / "cpuinfo", meminfo=root / "proc" / "meminfo",
                     node_root=root / "devices" / "system" / "node", cpu_root=root / "devices" / "system" / "cpu")
    return ProbePaths(host=host, infiniband=root / "class" / "infiniband", net=root / "class" / "net",
                      pci=root / "bus" / "pci" / "devices", modules=root / "module",
                      imex_nodes_config=root / "etc" / "nvidia-imex" / "nodes_config.cfg",
                      imex_channels=root / "dev" / "nvidia-caps-imex-channels")


def replay(outputs: dict[tuple[str, ...], str]) -> CommandRunner:
    """A runner answering the given commands with recorded output and every other command as not installed."""

    def run(args: Sequence[str]) -> CommandResult:
        argv = tuple(args)
        if argv in outputs:
            return CommandResult(argv, 0, outputs[argv])
        return CommandResult(argv, NOT_FOUND, "", f"{argv[0]}: command not found")

    return run


def h100_smi_runner(topo: str = "topo_hgx_h100.txt") -> CommandRunner:
    """nvidia-smi of the 8x H100 node: --query-gpu, nvlink -s and topo -m from the fixtures."""
    return replay({QUERY_COMMAND: fixture_text("query_gpu_h100_8gpu.csv"),
                   NVLINK_COMMAND: fixture_text("nvlink_h100_8gpu.txt"),
                   TOPO_COMMAND: fixture_text(topo)})
