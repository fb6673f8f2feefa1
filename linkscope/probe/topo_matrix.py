"""`nvidia-smi topo -m`: the GPU/NIC connection matrix, its affinity columns and its NIC legend.

Two layouts are read: the current one (`GPU0 … NIC0 … CPU Affinity NUMA Affinity GPU NUMA ID`, plus a
`NIC Legend` naming `NIC0: mlx5_0`) and the older one that put `mlx5_*` names straight into the header and had
no legend. The header may carry ANSI underline escapes. Cells are kept as printed (`X`, `NV18`, `PIX`, `SYS`...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from linkscope.probe.text import Problem, numbered_lines, strip_ansi

SOURCE = "nvidia-smi topo -m"
PCIE_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
"""PCIe path kinds from nearest to farthest, as in the legend."""

_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NV = re.compile(r"^NV(\d+)$")
_KNOWN_CELL = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")
_LEGEND_NIC = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_ROW_LABEL = re.compile(r"^(GPU\d+|NIC\d+|mlx\w*|\w+_\d+)$")


@dataclass
class TopoMatrix:
    """The matrix: `cells[row][column]` as printed; labels are `GPU0`, `NIC0` or old-style `mlx5_0`."""

    columns: list[str] = field(default_factory=list)
    cells: dict[str, dict[str, str]] = field(default_factory=dict)
    affinity: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per row: `CPU Affinity`, `NUMA Affinity`, `GPU NUMA ID` where printed."""
    nic_names: dict[str, str] = field(default_factory=dict)
    """`NIC0` -> `mlx5_0` from the NIC legend; old layouts name NICs directly."""
    source: str = SOURCE
    problems: list[Problem] = field(default_factory=list)

    @property
    def gpus(self) -> list[str]:
        """GPU labels in column order."""
        return [c for c in self.columns if c.startswith("GPU")]

    @property
    def nics(self) -> list[str]:
        """NIC labels in column order (`NIC0` or `mlx5_0`)."""
        return [c for c in self.columns if not c.startswith("GPU")]

    def cell(self, row: str, column: str) -> str | None:
        """The printed connection between two devices, None when absent."""
        return self.cells.get(row, {}).get(column)

    def nvlinks_between(self, a: str, b: str) -> int:
        """Number of bonded NVLinks between two devices (the # of `NV#`), 0 for a PCIe path or none."""
        match = _NV.match(self.cell(a, b) or self.cell(b, a) or "")
        return int(match.group(1)) if match else 0

    def nic_device(self, label: str) -> str:
        """The RDMA device name of a NIC column (`NIC0` -> `mlx5_0`); old layouts already use it."""
        return self.nic_names.get(label, label)

    def gpu_numa_affinity(self, gpu: str) -> int | None:
        """The NUMA node printed for a GPU row, None when N/A or absent."""
        value = self.affinity.get(gpu, {}).get("NUMA Affinity", "")
        return int(value) if value.isdigit() else None

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"source": self.source, "columns": self.columns, "cells": self.cells, "affinity": self.affinity,
                "nic_names": self.nic_names, "problems": [p.to_dict() for p in self.problems]}


def _header_tokens(line: str) -> list[str]:
    """Split the header on whitespace, keeping the multi-word affinity column names whole."""
    placeholders = {name: name.replace(" ", "\x00") for name in _AFFINITY_COLUMNS}
    for name, token in placeholders.items():
        line = line.replace(name, token)
    return [tok.replace("\x00", " ") for tok in line.split()]


def parse_topo_matrix(text: str, source: str = SOURCE) -> TopoMatrix:
    """Read `nvidia-smi topo -m` output; what cannot be read is listed in `problems` with its line number."""
    topo = TopoMatrix(source=source)
    lines = [(n, strip_ansi(line).replace("\t", "    ")) for n, line in numbered_lines(text)]
    header_at = next((i for i, (_, line) in enumerate(lines) if _looks_like_header(line)), None)
    if header_at is None:
        topo.problems.append(Problem(source, "no matrix header (a line starting with GPU0 ...) found"))
        return topo
    header = _header_tokens(lines[header_at][1])
    topo.columns = [t for t in header if t not in _AFFINITY_COLUMNS]
    extra = [t for t in header if t in _AFFINITY_COLUMNS]
    in_legend = False
    for number, line in lines[header_at + 1:]:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("Legend") or stripped.startswith("NIC Legend"):
            in_legend = True
            continue
        if in_legend:
            _read_legend_line(topo, stripped)
            continue
        _read_row(topo, number, line, extra)
    _check_complete(topo)
    return topo


def _looks_like_header(line: str) -> bool:
    tokens = line.split()
    return len(tokens) >= 1 and tokens[0] == "GPU0" and (len(tokens) == 1 or tokens[1] != "X")


def _read_legend_line(topo: TopoMatrix, line: str) -> None:
    match = _LEGEND_NIC.match(line)
    if match:
        topo.nic_names[match.group(1)] = match.group(2)


def _read_row(topo: TopoMatrix, number: int, line: str, extra: list[str]) -> None:
    tokens = line.split()
    label, values = tokens[0], tokens[1:]
    if label not in topo.columns:
        if _ROW_LABEL.match(label):
            topo.problems.append(Problem(topo.source, f"row {label} is not a column of the header", number, line))
        else:
            topo.problems.append(Problem(topo.source, "unexpected line in the matrix", number, line))
        return
    width = len(topo.columns)
    if len(values) < width:
        topo.problems.append(Problem(topo.source, f"row {label} has {len(values)} cells, expected {width}",
                                     number, line))
    row = dict(zip(topo.columns, values[:width]))
    for column, cell in row.items():
        if not _KNOWN_CELL.match(cell):
            topo.problems.append(Problem(topo.source, f"unknown connection '{cell}' ({label}-{column})", number, line))
    topo.cells[label] = row
    if len(values) > width:
        topo.affinity[label] = dict(zip(extra, values[width:]))


def _check_complete(topo: TopoMatrix) -> None:
    missing = [label for label in topo.gpus if label not in topo.cells]
    if missing:
        topo.problems.append(Problem(topo.source, f"no row for {', '.join(missing)}"))


def pcie_level(cell: str | None) -> str | None:
    """The PCIe path kind of a cell (`PIX` ... `SYS`; older drivers' `SOC` reads as `SYS`), None for NVLink."""
    if cell is None or _NV.match(cell):
        return None
    if cell == "SOC":
        return "SYS"
    return cell if cell in PCIE_LEVELS else None
