"""`nvidia-smi` text: `--query-gpu` CSV, `nvlink -s` link status, and the reader that runs all three commands.

Used when nvidia-ml-py is not installed but the driver's `nvidia-smi` is. The parsers take text, so recorded
outputs can be read on any machine.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

from linkscope.probe.records import GpuInfo, NvLink
from linkscope.probe.runner import CommandRunner, run_command
from linkscope.probe.text import Problem, is_missing, numbered_lines, strip_ansi, to_float, to_int
from linkscope.probe.topo_matrix import TopoMatrix, parse_topo_matrix

QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "pcie.link.gen.current", "pcie.link.gen.max",
                "pcie.link.width.current", "pcie.link.width.max", "driver_version")
"""Fields of `nvidia-smi --query-gpu`, in this order; all exist in drivers of the last several years."""

QUERY_COMMAND = ("nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits")
NVLINK_COMMAND = ("nvidia-smi", "nvlink", "-s")
TOPO_COMMAND = ("nvidia-smi", "topo", "-m")

_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)]*)\))?\s*$")
_LINK_LINE = re.compile(r"^Link\s+(\d+):\s*(.*?)\s*$")
_RATE = re.compile(r"^([\d.]+)\s*GB/s$", re.IGNORECASE)
_MIB_PER_GIB = 1024.0


@dataclass
class QueryRow:
    """One GPU from `--query-gpu`, with the driver version printed on every row."""

    gpu: GpuInfo
    driver_version: str | None = None


def parse_gpu_query(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> tuple[list[QueryRow], list[Problem]]:
    """Read `--query-gpu=<fields> --format=csv,noheader,nounits`; memory.total is MiB there."""
    rows: list[QueryRow] = []
    problems: list[Problem] = []
    source = "nvidia-smi --query-gpu"
    for number, line in numbered_lines(text):
        if not line.strip():
            continue
        values = next(csv.reader([line], skipinitialspace=True))
        if len(values) != len(fields):
            problems.append(Problem(source, f"expected {len(fields)} values, got {len(values)}", number, line))
            continue
        record = {name: value.strip() for name, value in zip(fields, values)}
        index = to_int(record.get("index"))
        if index is None or is_missing(record.get("name")):
            problems.append(Problem(source, "no GPU index or name", number, line))
            continue
        rows.append(QueryRow(_gpu_from_query(index, record), _text(record.get("driver_version"))))
    return rows, problems


def _text(value: str | None) -> str | None:
    return None if is_missing(value) else value


def _gpu_from_query(index: int, record: dict[str, str]) -> GpuInfo:
    memory_mib = to_float(record.get("memory.total"))
    return GpuInfo(
        index=index, name=record["name"], uuid=_text(record.get("uuid")), pci_bus_id=_text(record.get("pci.bus_id")),
        memory_gib=None if memory_mib is None else round(memory_mib / _MIB_PER_GIB, 2),
        pcie_gen_current=to_int(record.get("pcie.link.gen.current")),
        pcie_gen_max=to_int(record.get("pcie.link.gen.max")),
        pcie_width_current=to_int(record.get("pcie.link.width.current")),
        pcie_width_max=to_int(record.get("pcie.link.width.max")),
    )


@dataclass
class NvlinkStatus:
    """`nvidia-smi nvlink -s`: per GPU index, its name, UUID and links."""

    gpus: dict[int, GpuInfo] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """Read `nvidia-smi nvlink -s`: `GPU n: NAME (UUID: ...)` then `Link k: 25 GB/s` or `Link k: <inactive>`."""
    status = NvlinkStatus()
    source = "nvidia-smi nvlink -s"
    current: GpuInfo | None = None
    for number, raw in numbered_lines(strip_ansi(text)):
        line = raw.strip()
        if not line:
            continue
        gpu_match, link_match = _GPU_LINE.match(line), _LINK_LINE.match(line)
        if gpu_match:
            index = int(gpu_match.group(1))
            current = GpuInfo(index=index, name=gpu_match.group(2), uuid=gpu_match.group(3))
            status.gpus[index] = current
        elif link_match and current is not None:
            link, problem = _read_link(int(link_match.group(1)), link_match.group(2))
            current.nvlinks.append(link)
            if problem:
                status.problems.append(Problem(source, problem, number, raw))
        elif "inactive" in line.lower() and current is not None:
            continue  # "all links are inActive": no Link lines follow, the GPU simply has none up
        else:
            status.problems.append(Problem(source, "unexpected line", number, raw))
    return status


def _read_link(link: int, value: str) -> tuple[NvLink, str | None]:
    rate = _RATE.match(value)
    if rate:
        return NvLink(link=link, active=True, gb_per_s=float(rate.group(1))), None
    if "inactive" in value.lower():
        return NvLink(link=link, active=False), None
    return NvLink(link=link, active=False), f"link {link}: unreadable rate '{value}'"


@dataclass
class SmiReading:
    """Everything read through `nvidia-smi`."""

    gpus: list[GpuInfo] = field(default_factory=list)
    topo: TopoMatrix | None = None
    driver_version: str | None = None
    problems: list[Problem] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Commands that failed, one line each."""


def read_smi(runner: CommandRunner = run_command) -> SmiReading:
    """Run `nvidia-smi --query-gpu`, `nvlink -s` and `topo -m` and combine them; failures are recorded, not raised."""
    reading = SmiReading()
    query = runner(QUERY_COMMAND)
    if not query.ok:
        reading.errors.append(query.why_failed())
        return reading
    rows, problems = parse_gpu_query(query.stdout)
    reading.problems.extend(problems)
    reading.gpus = [row.gpu for row in rows]
    reading.driver_version = next((row.driver_version for row in rows if row.driver_version), None)
    _add_nvlinks(reading, runner)
    reading.topo = read_topo(runner, reading)
    _add_numa_from_topo(reading)
    return reading


def _add_nvlinks(reading: SmiReading, runner: CommandRunner) -> None:
    result = runner(NVLINK_COMMAND)
    if not result.ok:
        reading.errors.append(result.why_failed())
        return
    status = parse_nvlink_status(result.stdout)
    reading.problems.extend(status.problems)
    for gpu in reading.gpus:
        if gpu.index in status.gpus:
            gpu.nvlinks = status.gpus[gpu.index].nvlinks


def read_topo(runner: CommandRunner, reading: SmiReading) -> TopoMatrix | None:
    """Run `nvidia-smi topo -m`; None (with the failure recorded in `reading`) when it does not run."""
    result = runner(TOPO_COMMAND)
    if not result.ok:
        reading.errors.append(result.why_failed())
        return None
    topo = parse_topo_matrix(result.stdout)
    reading.problems.extend(topo.problems)
    return topo


def _add_numa_from_topo(reading: SmiReading) -> None:
    if reading.topo is None:
        return
    for gpu in reading.gpus:
        if gpu.numa_node is None:
            gpu.numa_node = reading.topo.gpu_numa_affinity(f"GPU{gpu.index}")
