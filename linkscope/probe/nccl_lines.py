"""Reading single `NCCL_DEBUG=INFO` lines into records. Which transport each channel uses, which network NCCL picked,
and the other lines that reveal a fallback (reference: NCCL's format strings in transport/*.cc, init.cc).

Formats drift between versions (`Channel 03` vs `Channel 03/0`, `7[b2000]` bus ids vs `7[7]` device indices,
`SHM/direct/direct` vs `SHM/direct`), so the patterns key on `via <TRANSPORT>/` and treat the rest loosely.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from linkscope.probe.text import Problem, strip_ansi

SOURCE = "NCCL log"

# `host:pid:tid [dev] NCCL INFO message`; launchers may prepend their own tags, so the match is not anchored.
_PREFIX = re.compile(r"(?:(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+)\s+)?(?:\[(?P<dev>\d+)\]\s+)?"
                     r"NCCL\s+(?P<level>INFO|WARN|TRACE)\s?(?P<msg>.*)$")
_CONNECTION = re.compile(
    r"^(?:Channel|Ring)\s+(?P<ch>\d+)(?:/(?P<sub>\d+))?\s*:\s*(?P<src>\d+)(?:\[(?P<srcdev>[0-9a-fA-F]+)\])?\s*->\s*"
    r"(?P<dst>\d+)(?:\[(?P<dstdev>[0-9a-fA-F]+)\])?\s*(?:\[(?P<dir>send|receive)\]\s*)?via\s+(?P<via>\S.*?)\s*$")
_COLLNET = re.compile(r"^CollNet\s+(?P<ch>\d+)(?:/(?P<sub>\d+))?\s*:\s*(?P<rank>\d+)\s*"
                      r"(?:\[(?P<dir>send|receive)\]\s*)?via\s+(?P<via>\S.*?)\s*$")
_NET_VIA = re.compile(r"^(?P<kind>NET|COLLNET)/(?P<name>[^/]+)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<flags>.*)$")
_VERSION = re.compile(r"(?P<lib>[NR])CCL version\s*:?\s*(?P<version>\d+\.\d+\.\d+)(?:\S*?\+cuda(?P<cuda>[\d.]+))?")
_RAY_DEDUP = re.compile(r"\s*\[repeated \d+x across cluster\].*$")
"""Ray's log deduplication suffix (`... [repeated 15x across cluster]`), with its notice when it follows."""
_COMM_SUFFIX = re.compile(r"\s+comm\s+(?P<comm>0x[0-9a-fA-F]+)\s+nRanks\s+(?P<nranks>\d+)(?P<rest>.*)$")
"""RCCL's and newer NCCLs' `... comm 0x55d8 nRanks 32 [busId 17000]` at the end of a Channel/Trees/rings line."""
_NET_COMPLETION = re.compile(r"Got completion from peer\s+(?P<peer>\S+)\s+with\s+(?:error\s+|status\s*=\s*)"
                             r"(?P<status>\d+)")
_OFI_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is\s+(?P<provider>[\w;+-]+)")
_USING_NETWORK = re.compile(r"^Using network\s+(?P<name>\S.*?)\s*$")
_NET_NO_DEVICE = re.compile(r"^NET/(?P<name>\S+?)\s*:\s*No device found")
_NET_USING = re.compile(r"^NET/(?P<name>\S+?)\s*:\s*Using\s*(?P<devices>.*)$")
_NET_DEVICE = re.compile(r"\[(?P<index>\d+)\](?P<spec>[^\s\[;]+)")
_IB_DEVICE = re.compile(r"^(?P<name>[^:\s]+):(?P<port>\d+)/(?P<layer>[A-Za-z]+)(?P<rest>(?:/\w+)*)")
_RINGS = re.compile(r"^Connected all rings(?:,\s*use ring PXN\s+(?P<pxn>\d+)\s+GDR\s+(?P<gdr>\d+))?")
_CHANNEL_COUNTS = re.compile(r"(?P<count>\d+)\s+(?P<kind>\w+)\s+channels(?P<per_peer>\s+per\s+peer)?")
_NVLS_SUPPORT = re.compile(r"NVLS multicast support is (?P<not>not )?available(?: on dev (?P<dev>\S+))?")
_COMM = re.compile(r"\bcomm\s+(?P<comm>\S+)\s+rank\s+(?P<rank>\d+)\s+nranks\s+(?P<nranks>\d+)", re.IGNORECASE)
_COMM_FIELDS = {name: re.compile(rf"\b{name}\s+(\d+)") for name in ("nNodes", "localRanks", "localRank", "MNNVL")}
# NCCL's multi-node NVLink (src/mnnvl.cc, init.cc): each rank's fabric registration, then the clique it joined.
#   "MNNVL busId 0x%lx fabric UUID %lx.%lx cliqueId 0x%x state %d healthMask 0x%x"
#   "MNNVL %d cliqueId %x cliqueSize %d cliqueRank %d[ nvlDomainSize %d]"
_HEX = r"0x[0-9a-fA-F]{1,16}"
_MNNVL_FABRIC = re.compile(rf"^MNNVL busId\s+(?P<bus>{_HEX})\s+fabric UUID\s+(?P<uuid>[0-9a-fA-F]{{1,16}}\."
                           rf"[0-9a-fA-F]{{1,16}})\s+cliqueId\s+(?P<clique>{_HEX})\s+state\s+(?P<state>\d{{1,3}})"
                           rf"(?:\s+healthMask\s+(?P<health>{_HEX}))?")
_MNNVL_CLIQUE = re.compile(r"^MNNVL\s+(?P<on>\d)\s+cliqueId\s+(?P<clique>[0-9a-fA-F]{1,16})\s+cliqueSize\s+"
                           r"(?P<size>\d{1,9})\s+cliqueRank\s+(?P<rank>\d{1,9})(?:\s+nvlDomainSize\s+(?P<domain>\d{1,9}))?")
_ENV = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)\s+set by environment to\s+(?P<value>.*?)\.?\s*$")
_GRAPH_SYSTEM = re.compile(r"=== System : maxBw\s+(?P<max>[\d.]+)\s+totalBw\s+(?P<total>[\d.]+)")
# NCCL_DEBUG_SUBSYS=TUNING, rank 0, one line per collective call. NCCL >= 2.20 (src/enqueue.cc, INFO(NCCL_TUNING)):
#   "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"  (function, count x type size, names)
# older versions, the model's estimate at INFO (NVIDIA/nccl#1453, #1595): "%ld Bytes -> Algo %d proto %d time %f"
_TUNING_MARK = re.compile(r"\bBytes\s*->\s*Algo\b")
_TUNING_NAMED = re.compile(
    r"^(?P<func>[A-Za-z]+)\s*:\s*(?P<bytes>\d+)\s+Bytes\s*->\s*Algo\s+(?P<algo>[A-Za-z_]+\*?)\s+proto\s+"
    r"(?P<proto>[A-Za-z0-9_]+)(?:\s+channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?\s*$")
_TUNING_NUMERIC = re.compile(
    r"^(?P<bytes>\d+)\s+Bytes\s*->\s*Algo\s+(?P<algo>\d+)\s+proto\s+(?P<proto>\d+)\s+time\s+(?P<time>[\d.]+)\s*$")
NCCL_ALGOS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
"""NCCL_ALGO_* in index order (src/include/device.h); the numeric form prints the index."""
NCCL_PROTOS = ("LL", "LL128", "SIMPLE")
"""NCCL_PROTO_* in index order."""
_ALGO_SPELLINGS = {"COLLNETDIRECT": "COLLNET_DIRECT", "COLLNETCHAIN": "COLLNET_CHAIN", "NVLSTREE": "NVLS_TREE"}
NCCL_FUNC_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
                 "Broadcast": "broadcast", "Reduce": "reduce", "AlltoAll": "all_to_all", "SendRecv": "sendrecv",
                 "Gather": "gather", "Scatter": "scatter"}
"""ncclFuncToString's names -> linkscope's op names."""


@dataclass(frozen=True)
class Connection:
    """One channel's connection between two ranks, as one line reports it."""

    line: int
    channel: int
    src_rank: int
    dst_rank: int
    path: str
    """Normalised transport: `P2P/CUMEM`, `P2P/direct`, `P2P/IPC`, `P2P/indirect`, `SHM`, `NET/IB`, `NET/Socket`..."""
    via: str
    """Everything after `via`, as printed (`NET/IB/3/GDRDMA`), without a `comm 0x.. nRanks N` suffix."""
    direction: str | None = None
    gdrdma: bool = False
    read: bool = False
    net_device: int | None = None
    proxy_rank: int | None = None
    host: str | None = None
    sub_channel: int | None = None

    @property
    def transport(self) -> str:
        """P2P, SHM, NET or COLLNET."""
        return self.path.split("/", 1)[0]


@dataclass(frozen=True)
class NetDevice:
    """One device of a `NET/<name> : Using [i]dev...` line."""

    line: int
    net: str
    index: int
    name: str
    port: int | None = None
    link_layer: str | None = None
    """`IB` or `RoCE` for the IB transport, None for sockets."""
    sharp: bool = False


@dataclass(frozen=True)
class CommInfo:
    """A `comm ... rank r nRanks n nNodes k localRanks l` line."""

    line: int
    comm: str
    rank: int
    nranks: int
    nnodes: int | None = None
    local_ranks: int | None = None
    local_rank: int | None = None
    mnnvl: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class MnnvlFabric:
    """One rank's fabric registration as NCCL read it (`MNNVL busId ... state ...`): state 3 is completed."""

    line: int
    bus_id: str
    fabric_uuid: str
    clique_id: int
    state: int
    health_mask: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class MnnvlClique:
    """`MNNVL 1 cliqueId 7ffe cliqueSize 8 cliqueRank 2`: whether NCCL uses multi-node NVLink and the clique."""

    line: int
    enabled: bool
    clique_id: int
    clique_size: int
    clique_rank: int
    domain_size: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class TuningChoice:
    """What NCCL chose for one collective call (a TUNING line)."""

    line: int
    op: str | None
    """linkscope's op name; None for the old numeric form, which does not name the collective."""
    nccl_bytes: int
    """As NCCL prints it: count x type size, i.e. per rank for AllGather and ReduceScatter."""
    algo: str
    """Upper case as NCCL 2.2x prints it: RING, TREE, NVLS, NVLS_TREE, COLLNET_DIRECT, COLLNET_CHAIN, PAT."""
    proto: str
    """LL, LL128 or SIMPLE."""
    channels: int | None = None
    """channel{Lo..Hi}: Hi - Lo + 1; None in the numeric form."""
    model_time_us: float | None = None
    """NCCL's own estimate (numeric form only)."""
    host: str | None = None


@dataclass
class ParsedLog:
    """Every record read from one log, in line order."""

    lines_total: int = 0
    nccl_lines: int = 0
    version: str | None = None
    cuda_version: str | None = None
    library: str = "NCCL"
    """`RCCL` where the log says so (AMD's fork prints `RCCL version`)."""
    hosts: list[str] = field(default_factory=list)
    """Host names the line prefixes name, in order of first appearance."""
    comm_sizes: list[tuple[int, str, int]] = field(default_factory=list)
    """(line, comm, nranks) of lines ending `comm 0x.. nRanks N` (RCCL, NCCL 2.2x Channel and Trees lines)."""
    net_errors: list[tuple[int, int, str]] = field(default_factory=list)
    """(line, work-completion status, message) of failed network completions (`Got completion from peer`)."""
    ofi_providers: list[tuple[int, str]] = field(default_factory=list)
    """(line, provider) of aws-ofi-nccl's `Selected Provider is efa|cxi|...`."""
    connections: list[Connection] = field(default_factory=list)
    collnet: list[Connection] = field(default_factory=list)
    networks: list[tuple[int, str]] = field(default_factory=list)
    net_devices: list[NetDevice] = field(default_factory=list)
    no_device: list[tuple[int, str]] = field(default_factory=list)
    rings: list[tuple[int, int | None, int | None]] = field(default_factory=list)
    """(line, PXN, GDR) of `Connected all rings` lines; PXN/GDR None on versions that print neither."""
    channel_counts: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    nvls_support: list[tuple[int, bool]] = field(default_factory=list)
    nvls_comm_lines: list[int] = field(default_factory=list)
    comms: list[CommInfo] = field(default_factory=list)
    env: list[tuple[int, str, str]] = field(default_factory=list)
    warns: list[tuple[int, str]] = field(default_factory=list)
    graph_bw_gb_per_s: list[tuple[int, float, float]] = field(default_factory=list)
    """(line, maxBw, totalBw) of the GRAPH `=== System` lines: NCCL's topology model, in GB/s."""
    tuning: list[TuningChoice] = field(default_factory=list)
    """NCCL's algorithm/protocol choices (NCCL_DEBUG_SUBSYS=TUNING), in line order."""
    mnnvl_fabric: list[MnnvlFabric] = field(default_factory=list)
    mnnvl_cliques: list[MnnvlClique] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def parse_log(text: str) -> ParsedLog:
    """Read every NCCL line of a log; other lines are skipped, unreadable NCCL lines become problems."""
    log = ParsedLog()
    hosts: dict[str, None] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        log.lines_total += 1
        if "\x1b" in raw:
            raw = strip_ansi(raw)
        if "across cluster]" in raw:
            raw = _RAY_DEDUP.sub("", raw)
        match = _PREFIX.search(raw) if "CCL" in raw else None  # most lines of a run are not NCCL's
        if match is None:
            _read_bare(log, number, raw)
            continue
        log.nccl_lines += 1
        message, host = match.group("msg").strip(), match.group("host")
        if host:
            hosts.setdefault(host)
        message = _read_comm_suffix(log, number, message)
        if match.group("level") == "WARN":
            log.warns.append((number, message))
            _read_net_error(log, number, message)
        elif not _read_message(log, number, message, host):
            _read_bare(log, number, message)
    log.hosts = list(hosts)
    return log


def _read_comm_suffix(log: ParsedLog, number: int, message: str) -> str:
    """Record and cut a trailing `comm 0x.. nRanks N ...`, so the transport before it reads as usual."""
    match = _COMM_SUFFIX.search(message) if "nRanks" in message else None
    if match is None or re.search(r"\brank\s+\d+\s+nRanks", message):
        return message  # `comm 0x.. rank r nRanks n ...` is the communicator line itself (_read_comm)
    log.comm_sizes.append((number, match.group("comm"), int(match.group("nranks"))))
    return message[: match.start()]


def _read_net_error(log: ParsedLog, number: int, message: str) -> None:
    match = _NET_COMPLETION.search(message)
    if match is not None:
        log.net_errors.append((number, int(match.group("status")), message))


def _read_bare(log: ParsedLog, number: int, text: str) -> None:
    """Lines NCCL prints without its usual prefix (the version banner on some launchers)."""
    version = _VERSION.search(text)
    if version and log.version is None:
        log.version, log.cuda_version = version.group("version"), version.group("cuda")
        log.library = "RCCL" if version.group("lib") == "R" else "NCCL"


def _read_message(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    """Dispatch one INFO message; True when a reader took it."""
    readers = (_read_tuning, _read_connection, _read_collnet, _read_network, _read_rings, _read_channels,
               _read_nvls, _read_mnnvl, _read_comm, _read_env, _read_graph, _read_provider)
    return any(reader(log, number, message, host) for reader in readers)


def _read_connection(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    if not re.match(r"^(?:Channel|Ring)\s+\d", message) or " via " not in f" {message} ":
        return False
    match = _CONNECTION.match(message)
    if match is None:
        log.problems.append(Problem(SOURCE, "connection line not understood", number, message))
        return True
    connection, problem = _connection(number, match, host)
    log.connections.append(connection)
    if problem:
        log.problems.append(Problem(SOURCE, problem, number, message))
    return True


def _connection(number: int, match: re.Match[str], host: str | None) -> tuple[Connection, str | None]:
    via = match.group("via")
    path, details, problem = classify_via(via)
    sub = match.group("sub")
    return Connection(line=number, channel=int(match.group("ch")), sub_channel=None if sub is None else int(sub),
                      src_rank=int(match.group("src")), dst_rank=int(match.group("dst")), path=path, via=via,
                      direction=match.group("dir"), host=host, **details), problem


def classify_via(via: str) -> tuple[str, dict[str, Any], str | None]:
    """(normalised path, flags, problem) for the text after `via`, e.g. `P2P/IPC/read` or `NET/IB/0(4)/GDRDMA`."""
    transport, _, rest = via.partition("/")
    if transport == "P2P":
        mode = rest.split("/", 1)[0].strip()
        name = {"direct pointer": "direct", "direct": "direct"}.get(mode, mode)
        return f"P2P/{name}", {"read": "/read" in f"/{rest}"}, None if name else "P2P line without a mode"
    if transport == "SHM" or via.strip() == "direct shared memory":
        # NCCL 2.7/2.8 printed its SHM transport as `via direct shared memory`.
        return "SHM", {}, None
    net = _NET_VIA.match(via)
    if net is not None:
        flags = net.group("flags")
        proxy = net.group("proxy")
        return (f"{net.group('kind')}/{net.group('name')}",
                {"gdrdma": "GDRDMA" in flags, "net_device": int(net.group("dev")),
                 "proxy_rank": None if proxy is None else int(proxy)}, None)
    return transport or via, {}, f"unknown transport '{via}'"


def _read_collnet(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    match = _COLLNET.match(message)
    if match is None:
        return False
    path, details, problem = classify_via(match.group("via"))
    rank = int(match.group("rank"))
    log.collnet.append(Connection(line=number, channel=int(match.group("ch")), src_rank=rank, dst_rank=rank,
                                  path=path, via=match.group("via"), direction=match.group("dir"), host=host,
                                  **details))
    if problem:
        log.problems.append(Problem(SOURCE, problem, number, message))
    return True


def _read_network(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    if (using := _USING_NETWORK.match(message)) is not None:
        log.networks.append((number, using.group("name")))
    elif (none := _NET_NO_DEVICE.match(message)) is not None:
        log.no_device.append((number, none.group("name")))
    elif (devices := _NET_USING.match(message)) is not None:
        found = _net_devices(number, devices.group("name"), devices.group("devices"))
        if not found:
            log.problems.append(Problem(SOURCE, "network device list not understood", number, message))
        log.net_devices.extend(found)
    else:
        return False
    return True


def _net_devices(number: int, net: str, text: str) -> list[NetDevice]:
    """`[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ...` -> devices (the OOB interface after `;` is not one)."""
    devices = []
    for match in _NET_DEVICE.finditer(text.split(";", 1)[0]):
        spec = match.group("spec")
        ib = _IB_DEVICE.match(spec)
        if ib is not None:
            devices.append(NetDevice(number, net, int(match.group("index")), ib.group("name"), int(ib.group("port")),
                                     ib.group("layer"), "SHARP" in ib.group("rest").upper()))
        else:
            devices.append(NetDevice(number, net, int(match.group("index")), spec.split(":", 1)[0]))
    return devices


def _read_rings(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    match = _RINGS.match(message)
    if match is None:
        return False
    pxn, gdr = match.group("pxn"), match.group("gdr")
    log.rings.append((number, None if pxn is None else int(pxn), None if gdr is None else int(gdr)))
    return True


def _read_channels(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    if not re.match(r"^\d+\s+coll\s+channels", message):
        return False
    counts = {m.group("kind") + ("_per_peer" if m.group("per_peer") else ""): int(m.group("count"))
              for m in _CHANNEL_COUNTS.finditer(message)}
    log.channel_counts.append((number, counts))
    return True


def _read_nvls(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    if (support := _NVLS_SUPPORT.search(message)) is not None:
        log.nvls_support.append((number, support.group("not") is None))
        return True
    if message.startswith("NVLS comm "):
        log.nvls_comm_lines.append(number)
        return True
    return False


def _read_mnnvl(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    if not message.startswith("MNNVL "):
        return False
    if (fabric := _MNNVL_FABRIC.match(message)) is not None:
        health = fabric.group("health")
        log.mnnvl_fabric.append(MnnvlFabric(number, fabric.group("bus"), fabric.group("uuid"),
                                            int(fabric.group("clique"), 16), int(fabric.group("state")),
                                            None if health is None else int(health, 16), host))
    elif (clique := _MNNVL_CLIQUE.match(message)) is not None:
        domain = clique.group("domain")
        log.mnnvl_cliques.append(MnnvlClique(number, clique.group("on") != "0", int(clique.group("clique"), 16),
                                             int(clique.group("size")), int(clique.group("rank")),
                                             None if domain is None else int(domain), host))
    else:
        log.problems.append(Problem(SOURCE, "MNNVL line not understood", number, message))
    return True


def _read_comm(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    match = _COMM.search(message)
    if match is None:
        return False
    fields = {name: _int_field(pattern, message) for name, pattern in _COMM_FIELDS.items()}
    log.comms.append(CommInfo(line=number, comm=match.group("comm"), rank=int(match.group("rank")),
                              nranks=int(match.group("nranks")), nnodes=fields["nNodes"],
                              local_ranks=fields["localRanks"], local_rank=fields["localRank"],
                              mnnvl=fields["MNNVL"], host=host))
    return True


def _int_field(pattern: re.Pattern[str], message: str) -> int | None:
    match = pattern.search(message)
    return None if match is None else int(match.group(1))


def _read_env(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    match = _ENV.match(message)
    if match is None:
        return False
    log.env.append((number, match.group("name"), match.group("value")))
    return True


def _read_graph(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    match = _GRAPH_SYSTEM.search(message)
    if match is None:
        return False
    log.graph_bw_gb_per_s.append((number, float(match.group("max")), float(match.group("total"))))
    return True


def _read_provider(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    match = _OFI_PROVIDER.match(message)
    if match is None:
        return False
    log.ofi_providers.append((number, match.group("provider")))
    return True


def _read_tuning(log: ParsedLog, number: int, message: str, host: str | None) -> bool:
    if _TUNING_MARK.search(message) is None:
        return False
    choice = tuning_choice(number, message, host)
    if choice is None:
        log.problems.append(Problem(SOURCE, "TUNING line of an unknown format", number, message))
    else:
        log.tuning.append(choice)
    return True


def tuning_choice(number: int, message: str, host: str | None = None) -> TuningChoice | None:
    """One `... Bytes -> Algo ...` message (either form) as a TuningChoice; None when neither form matches."""
    named = _TUNING_NAMED.match(message)
    if named is not None:
        func, lo, hi = named.group("func"), named.group("lo"), named.group("hi")
        algo = named.group("algo").rstrip("*").upper()
        if func not in NCCL_FUNC_OPS:
            return None
        return TuningChoice(number, NCCL_FUNC_OPS[func], int(named.group("bytes")), _ALGO_SPELLINGS.get(algo, algo),
                            named.group("proto").upper(),
                            None if lo is None or hi is None or int(hi) < int(lo) else int(hi) - int(lo) + 1,
                            host=host)
    numeric = _TUNING_NUMERIC.match(message)
    if numeric is None:
        return None
    algo, proto = int(numeric.group("algo")), int(numeric.group("proto"))
    if algo >= len(NCCL_ALGOS) or proto >= len(NCCL_PROTOS):
        return None
    return TuningChoice(number, None, int(numeric.group("bytes")), NCCL_ALGOS[algo], NCCL_PROTOS[proto],
                        model_time_us=float(numeric.group("time")), host=host)


def is_tuning_line(text: str) -> bool:
    """Whether a raw log line is a TUNING choice (one per collective call: what log capture thins out)."""
    return "NCCL" in text and _TUNING_MARK.search(text) is not None


def nccl_bytes(op: str, size_bytes: int, world: int) -> int:
    """The byte count NCCL's TUNING line prints for a collective of nccl-tests size `size_bytes`: count x type size,
    where AllGather's count is per rank (sendcount) and ReduceScatter's too (recvcount)."""
    return size_bytes // max(1, world) if op in ("all_gather", "reduce_scatter") else size_bytes


@dataclass(frozen=True)
class SizeChoice:
    """NCCL's choice for one op and size: the one most of its calls got, and how many calls there were."""

    op: str | None
    nccl_bytes: int
    algo: str
    proto: str
    channels: int | None
    calls: int
    other_calls: int = 0
    """Calls of this size that got another algorithm, protocol or channel count."""
    first_line: int = 0

    def label(self) -> str:
        """`RING/LL128 x16` (channels where known)."""
        return f"{self.algo}/{self.proto}" + (f" x{self.channels}" if self.channels else "")


def choices_by_size(choices: list[TuningChoice]) -> list[SizeChoice]:
    """One SizeChoice per (op, bytes), in order of first appearance."""
    groups: dict[tuple[str | None, int], list[TuningChoice]] = {}
    for choice in choices:
        groups.setdefault((choice.op, choice.nccl_bytes), []).append(choice)
    out = []
    for (op, nbytes), calls in groups.items():
        counts: dict[tuple[str, str, int | None], int] = {}
        for c in calls:
            counts[(c.algo, c.proto, c.channels)] = counts.get((c.algo, c.proto, c.channels), 0) + 1
        (algo, proto, channels), n = max(counts.items(), key=lambda kv: kv[1])
        out.append(SizeChoice(op, nbytes, algo, proto, channels, len(calls), len(calls) - n, calls[0].line))
    return out
