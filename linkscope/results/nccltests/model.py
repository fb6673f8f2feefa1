"""What an nccl-tests output file holds once read: one section per collective run, plus what could not be read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from linkscope.results.busbw import BINARY_TO_OP
from linkscope.results.records import CollectiveRow

Layout = Literal["pre-2.13", "2.13", "2.19-I", "unknown"]
"""Text table layouts: `error` column (before 2.13), `#wrong` + `root` (2.13+), per-iteration columns (2.19+ `-I`)."""

_BINARY = re.compile(r"^(?P<base>[a-z_]+?_perf)(?:_\w+)?$")


@dataclass
class Device:
    """One `# Rank N Group G Pid P on HOST device D [BUS] NAME` line (or one JSON `devices` entry)."""

    rank: int
    host: str
    device: int
    name: str
    bus_id: str = ""
    group: int | None = None
    pid: int | None = None


@dataclass
class Problem:
    """Something that looked like nccl-tests output but could not be read."""

    line: int | None
    """1-based line number in the file (text), None for JSON."""
    message: str
    invalid: bool = False
    """A value no real run prints (linkscope.results.nccltests.validate): the import is refused."""

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line is not None else self.message


@dataclass
class NcclTestsSection:
    """One run of one nccl-tests binary: header, devices, table rows and footer."""

    op: str = "unknown"
    binary: str | None = None
    first_line: int | None = None
    tests_version: str | None = None
    nccl_headers: int | None = None
    """NCCL_VERSION_CODE the binary was compiled against, e.g. 22803."""
    nccl_library: int | None = None
    """Version code of the NCCL library it ran with."""
    config: dict[str, Any] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)
    rows: list[CollectiveRow] = field(default_factory=list)
    layout: Layout = "unknown"
    columns: tuple[str, ...] = ()
    """The table's column names as the header printed them: leading fields, then one placement's fields."""
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    avg_busbw: float | None = None
    """The footer's `Avg bus bandwidth`, as printed."""
    concluded: bool = False
    headed: bool = False
    """The section had a header of its own (binary, config or device lines), not only table rows."""
    sizes_at: dict[int, int] = field(default_factory=dict)
    """Line of the row that first printed each size."""

    @property
    def world_size(self) -> int:
        """Ranks listed under `Using devices` (distinct rank numbers); 0 when none were listed."""
        return len({d.rank for d in self.devices})

    @property
    def hosts(self) -> list[str]:
        """Host names in rank order, each once."""
        return list(dict.fromkeys(d.host for d in self.devices))

    def set_binary(self, binary: str) -> None:
        """Record the binary and the op it measures (an unknown binary keeps op 'unknown')."""
        self.binary = binary.rsplit("/", 1)[-1]
        self.op = op_from_binary(self.binary)


@dataclass
class ParsedNcclTests:
    """Everything read from one nccl-tests output file."""

    source_name: str
    format: Literal["text", "json"]
    sections: list[NcclTestsSection] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    nccl_version: str | None = None
    """As NCCL printed it (`NCCL version 2.21.5+cuda12.4`), else derived from the library version code."""
    library: Literal["nccl", "rccl"] = "nccl"
    """`rccl` for rccl-tests output (`RCCL version : ...`, `rccl-tests: Version ...`)."""
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    failures: list[Problem] = field(default_factory=list)
    """`Test NCCL failure ...` and the like: the test died; the run is stored as failed with the first one."""

    @property
    def rows(self) -> list[CollectiveRow]:
        """All sections' rows in file order."""
        return [row for section in self.sections for row in section.rows]

    @property
    def world_size(self) -> int:
        """The largest world size of any section."""
        return max((s.world_size for s in self.sections), default=0)

    @property
    def hosts(self) -> list[str]:
        """Every host named in any section, each once."""
        return list(dict.fromkeys(h for s in self.sections for h in s.hosts))

    @property
    def tests_version(self) -> str | None:
        """The nccl-tests version of the first section that printed one."""
        return next((s.tests_version for s in self.sections if s.tests_version), None)


def op_from_binary(binary: str) -> str:
    """`all_reduce_perf`, `all_reduce_perf_mpi` or a path to either -> `all_reduce`; unknown -> `unknown`."""
    name = binary.rsplit("/", 1)[-1]
    if name in BINARY_TO_OP:
        return BINARY_TO_OP[name]
    match = _BINARY.match(name)
    return BINARY_TO_OP.get(match.group("base"), "unknown") if match else "unknown"


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE -> `major.minor.patch` (X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
