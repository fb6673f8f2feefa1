"""The NVLink fabric a node's GPUs have joined, and the IMEX domain that shares memory across its nodes.

On a GB200/GB300 NVL72 compute tray the GPUs register with the rack's fabric manager: `nvidia-smi -q` prints, per
GPU, a `Fabric` section with the registration's state and status, the clique (the NVLink partition) and the
cluster UUID; GPUs of one clique of one cluster reach each other over NVLink across trays. NCCL uses that path
(MNNVL) only where the trays also share an IMEX domain (`nvidia-imex-ctl -N`: every node READY and connected,
`Domain State: UP`) and the process has an IMEX channel (/dev/nvidia-caps-imex-channels).

The parsers take text: `nvidia-smi -q` in its XML form (`-x`, what the probe runs) or as printed (what people
paste), and the IMEX tool's table. A machine whose output has no fabric section, or reports `N/A`, a zero clique
or an all-zero cluster UUID, has no NVLink domain beyond its own NVSwitch: that is a reading, not an error.
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from linkscope.probe.runner import CommandRunner, run_command
from linkscope.probe.text import Problem, is_missing, numbered_lines, strip_ansi

SMI_QUERY_XML = ("nvidia-smi", "-q", "-x")
IMEX_STATUS_COMMAND = ("nvidia-imex-ctl", "-N")
IMEX_NODES_CONFIG = Path("/etc/nvidia-imex/nodes_config.cfg")
IMEX_CHANNELS = Path("/dev/nvidia-caps-imex-channels")
MAX_TEXT_CHARS = 20_000_000
"""Longer output is cut there: far beyond any machine's `nvidia-smi -q` (a 72-GPU host would print ~2 MB)."""

COMPLETED, SUCCESS = "completed", "success"
_ZERO_UUID = re.compile(r"^[0\-]+$")


@dataclass
class GpuFabric:
    """One GPU's fabric registration, as `nvidia-smi -q` reports it; None where it printed N/A or nothing."""

    gpu: str | None = None
    """The GPU's PCI bus id (the `GPU ...` heading), where the output carries it."""
    uuid: str | None = None
    state: str | None = None
    """`Completed`, `In Progress`, `Not Started`, `Not Supported`."""
    status: str | None = None
    """`Success`, or the error of a completed registration (`Insufficient Resources`)."""
    clique_id: int | None = None
    cluster_uuid: str | None = None
    health: str | None = None
    """The health summary: `Healthy`, `Unhealthy`, `Limited Capacity`."""
    chassis: str | None = None
    """The chassis (rack) serial number of the platform information, where printed."""
    tray: int | None = None

    @property
    def registered(self) -> bool:
        """Registration finished without error."""
        return (self.state or "").lower() == COMPLETED and (self.status or "").lower() == SUCCESS

    @property
    def in_domain(self) -> bool:
        """Registered into a clique of a cluster: NVLink beyond this node's own switch. A zero clique or cluster
        UUID is how an 8-GPU NVSwitch board without a multi-node fabric answers."""
        return self.registered and bool(self.clique_id) and self.cluster_uuid is not None \
            and not _ZERO_UUID.match(self.cluster_uuid)

    @property
    def clique(self) -> tuple[str, int] | None:
        """(cluster UUID, clique id) of a GPU in a domain."""
        return (self.cluster_uuid or "", self.clique_id or 0) if self.in_domain else None


@dataclass
class FabricReading:
    """Every GPU's fabric registration on one node, with what could not be read."""

    gpus: list[GpuFabric] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def reported(self) -> bool:
        """Some GPU reported a fabric state at all (a state other than N/A)."""
        return any(g.state is not None and g.state.lower() != "not supported" for g in self.gpus)

    @property
    def cliques(self) -> set[tuple[str, int]]:
        """The (cluster UUID, clique id) pairs this node's GPUs are in."""
        return {g.clique for g in self.gpus if g.clique is not None}

    @property
    def in_one_domain(self) -> bool:
        """Every GPU registered into the same clique of the same cluster."""
        return bool(self.gpus) and all(g.in_domain for g in self.gpus) and len(self.cliques) == 1

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"gpus": [asdict(g) for g in self.gpus], "in_one_domain": self.in_one_domain,
                "problems": [p.to_dict() for p in self.problems]}


def parse_fabric(text: str) -> FabricReading:
    """The fabric sections of `nvidia-smi -q`, XML (`-x`) or as printed; no section at all is an empty reading."""
    text = text[:MAX_TEXT_CHARS]
    if "<nvidia_smi_log" in text[:4096] or text.lstrip().startswith("<?xml"):
        return _parse_xml(text)
    return _parse_text(text)


# ---- XML (`nvidia-smi -q -x`) --------------------------------------------------------------------------------------
# Read with patterns rather than an XML parser: only a few elements matter, and a hostile file must not be able to
# expand entities or nest without end.

_XML_GPU = re.compile(r"<gpu\s+id=\"([^\"<>]{0,64})\"\s*>")
_XML_FABRIC = re.compile(r"<fabric>(.*?)</fabric>", re.S)


def _element(block: str, name: str) -> str | None:
    match = re.search(rf"<{name}>([^<]{{0,200}})</{name}>", block)
    if match is None:
        return None
    value = html.unescape(match.group(1)).strip()
    return None if is_missing(value) else value


def _parse_xml(text: str) -> FabricReading:
    reading = FabricReading()
    starts = [(m.start(), m.group(1)) for m in _XML_GPU.finditer(text)]
    blocks = [(gpu, text[start:(starts[i + 1][0] if i + 1 < len(starts) else len(text))])
              for i, (start, gpu) in enumerate(starts)] or [(None, text)]
    for gpu, block in blocks:
        fabric = _XML_FABRIC.search(block)
        if fabric is None:
            continue
        section = fabric.group(1)
        reading.gpus.append(GpuFabric(
            gpu=gpu, uuid=_element(block, "uuid"), state=_element(section, "state"),
            status=_element(section, "status"), clique_id=_small_int(_element(section, "cliqueId")),
            cluster_uuid=_element(section, "clusterUuid"), health=_element(section, "summary"),
            chassis=_element(block, "chassis_serial_number"), tray=_small_int(_element(block, "tray_index"))))
    if "<nvidia_smi_log" in text and "</nvidia_smi_log>" not in text:
        reading.problems.append(Problem("nvidia-smi -q -x", "output cut short (no closing </nvidia_smi_log>)"))
    return reading


# ---- text (`nvidia-smi -q` as printed) -----------------------------------------------------------------------------

_TEXT_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ()/_-]*?)\s*:\s*(?P<value>.*?)\s*$")
_TEXT_KEYS = {"state": "state", "status": "status", "cliqueid": "clique_id", "clusteruuid": "cluster_uuid",
              "summary": "health"}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _parse_text(text: str) -> FabricReading:
    reading = FabricReading()
    gpu: str | None = None
    uuid: str | None = None
    current: GpuFabric | None = None
    fabric_indent = -1
    for _, raw in numbered_lines(strip_ansi(text)):
        line = raw.rstrip()
        stripped = line.strip()
        if current is not None and stripped and _indent(line) <= fabric_indent:
            current, fabric_indent = None, -1
        heading = _TEXT_GPU.match(stripped)
        if heading:
            gpu, uuid = heading.group(1), None
        elif stripped == "Fabric":
            current, fabric_indent = GpuFabric(gpu=gpu, uuid=uuid), _indent(line)
            reading.gpus.append(current)
        elif (kv := _KEY_VALUE.match(stripped)) is not None:
            key = kv.group("key").replace(" ", "").lower()
            if current is None:
                uuid = kv.group("value") if key == "gpuuuid" else uuid
            elif key in _TEXT_KEYS:
                _set(current, _TEXT_KEYS[key], kv.group("value"))
    return reading


def _set(fabric: GpuFabric, name: str, value: str) -> None:
    if is_missing(value):
        return
    setattr(fabric, name, _small_int(value) if name == "clique_id" else value[:200])


def _small_int(value: str | None) -> int | None:
    """A non-negative integer of up to ten digits (clique ids and tray indices are 32-bit); None otherwise."""
    return int(value) if value is not None and re.fullmatch(r"\d{1,10}", value.strip()) else None


# ---- IMEX ----------------------------------------------------------------------------------------------------------

_IMEX_NODE = re.compile(r"^Node\s+#(?P<index>\d+)\s+-\s+(?P<address>\S+)\s+-\s+(?P<state>[A-Z_]+)")
_IMEX_ROW = re.compile(r"^\s*(?P<index>\d+)\s+(?P<cells>(?:(?:C|I|N|R|D|A|!V!|!M!)\s*)+)$")
_IMEX_DOMAIN = re.compile(r"^Domain State:\s*(?P<state>\S+)")


@dataclass
class ImexNode:
    """One node of the IMEX domain: its index, address and state (`READY` when up)."""

    index: int
    address: str
    state: str


@dataclass
class ImexReading:
    """What `nvidia-imex-ctl -N` (or, without it, the IMEX configuration files) says about the domain."""

    source: str = "none"
    """`nvidia-imex-ctl`, `files` (the node list and channel devices only) or `none`."""
    nodes: list[ImexNode] = field(default_factory=list)
    domain_state: str | None = None
    unconnected: list[tuple[int, int, str]] = field(default_factory=list)
    """(from, to, cell) of connectivity-table cells other than `C`."""
    configured_nodes: int | None = None
    """Addresses in nodes_config.cfg, where it was read."""
    channels: list[str] = field(default_factory=list)
    """IMEX channel devices present (/dev/nvidia-caps-imex-channels): a process needs one for MNNVL."""
    problems: list[Problem] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def node_count(self) -> int | None:
        """Nodes of the domain: those the tool lists, else those configured."""
        return len(self.nodes) or self.configured_nodes

    @property
    def up(self) -> bool:
        """The tool reports the domain UP, every node READY and every pair connected."""
        return (self.domain_state or "").upper() == "UP" and bool(self.nodes) and not self.unconnected \
            and all(n.state == "READY" for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {**asdict(self), "up": self.up, "problems": [p.to_dict() for p in self.problems]}


def parse_imex_status(text: str) -> ImexReading:
    """Read `nvidia-imex-ctl -N`: the node list, the connectivity table and the domain state."""
    reading = ImexReading(source="nvidia-imex-ctl")
    in_table = False
    for number, raw in numbered_lines(strip_ansi(text[:MAX_TEXT_CHARS])):
        line = raw.strip()
        if (node := _IMEX_NODE.match(line)) is not None:
            reading.nodes.append(ImexNode(int(node.group("index")), node.group("address"), node.group("state")))
        elif line.startswith("Nodes From"):
            in_table = True
        elif (domain := _IMEX_DOMAIN.match(line)) is not None:
            reading.domain_state, in_table = domain.group("state"), False
        elif in_table and (row := _IMEX_ROW.match(raw)) is not None:
            for to, cell in enumerate(row.group("cells").split()):
                if cell != "C":
                    reading.unconnected.append((int(row.group("index")), to, cell))
        elif in_table and line:
            reading.problems.append(Problem("nvidia-imex-ctl -N", "connectivity row not understood", number, raw))
    return reading


def read_imex(runner: CommandRunner = run_command, nodes_config: Path = IMEX_NODES_CONFIG,
              channels: Path = IMEX_CHANNELS) -> ImexReading:
    """The IMEX domain: `nvidia-imex-ctl -N` where it answers, else what its files say; nothing when neither."""
    result = runner(IMEX_STATUS_COMMAND)
    if result.ok:
        reading = parse_imex_status(result.stdout)
    else:
        reading = ImexReading()
        reading.errors.append(result.why_failed())
    reading.configured_nodes = _configured_nodes(nodes_config)
    reading.channels = _channels(channels)
    if reading.source == "none" and (reading.configured_nodes or reading.channels):
        reading.source = "files"
    return reading


def _configured_nodes(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:MAX_TEXT_CHARS]
    except OSError:
        return None
    addresses = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return len(addresses) or None


def _channels(path: Path) -> list[str]:
    try:
        return sorted(entry.name for entry in path.iterdir() if entry.name.startswith("channel"))
    except OSError:
        return []


def read_fabric(runner: CommandRunner = run_command) -> tuple[FabricReading | None, str | None]:
    """Run `nvidia-smi -q -x` and read its fabric sections; (None, why) when it does not run."""
    result = runner(SMI_QUERY_XML)
    if not result.ok:
        return None, result.why_failed()
    return parse_fabric(result.stdout), None
