"""Per pair of ranks: which transports their channels use, and whether the two ranks share a host."""

from __future__ import annotations

from dataclasses import dataclass, field

from linkscope.probe.nccl_lines import Connection, ParsedLog

INTRA_NODE_TRANSPORTS = ("P2P", "SHM")
"""Transports NCCL only uses between GPUs of one node (but for P2P/MNNVL)."""
MNNVL_PATH = "P2P/MNNVL"
"""NVLink between hosts of one NVLink domain (NCCL's multi-node NVLink, src/transport/p2p.cc)."""


@dataclass
class PairSummary:
    """One directed pair of ranks. `channels_by_path` counts distinct channels per transport path."""

    src_rank: int
    dst_rank: int
    channels_by_path: dict[str, int] = field(default_factory=dict)
    gdrdma_channels: int = 0
    net_channels: int = 0
    read_channels: int = 0
    same_host: bool | None = None
    """True/False when both ranks' hosts are known (or the transport implies it), None otherwise."""
    lines: list[int] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        """Transport paths used, most channels first."""
        return sorted(self.channels_by_path, key=lambda p: (-self.channels_by_path[p], p))

    def uses(self, prefix: str) -> bool:
        """Whether any channel's path starts with `prefix` (`SHM`, `NET/Socket`, `P2P`...)."""
        return any(path.startswith(prefix) for path in self.channels_by_path)

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"src_rank": self.src_rank, "dst_rank": self.dst_rank, "channels_by_path": self.channels_by_path,
                "gdrdma_channels": self.gdrdma_channels, "net_channels": self.net_channels,
                "read_channels": self.read_channels, "same_host": self.same_host, "lines": self.lines[:20]}


def rank_hosts(log: ParsedLog) -> dict[int, str]:
    """Host of each rank, from `comm ... rank r` lines and from the side that printed a [send]/[receive] line."""
    hosts: dict[int, str] = {}
    for comm in log.comms:
        if comm.host:
            hosts.setdefault(comm.rank, comm.host)
    for conn in log.connections:
        if conn.host and conn.direction == "send":
            hosts.setdefault(conn.src_rank, conn.host)
        elif conn.host and conn.direction == "receive":
            hosts.setdefault(conn.dst_rank, conn.host)
    return _drop_shared_names(log, hosts)


def _drop_shared_names(log: ParsedLog, hosts: dict[int, str]) -> dict[int, str]:
    """Forget host names that more ranks share than one node holds: several nodes carry that name (`ubuntu`)."""
    local_ranks = max((c.local_ranks for c in log.comms if c.local_ranks), default=None)
    nnodes = max((c.nnodes for c in log.comms if c.nnodes), default=1)
    per_name: dict[str, int] = {}
    for name in hosts.values():
        per_name[name] = per_name.get(name, 0) + 1
    shared = {name for name, count in per_name.items()
              if (local_ranks is not None and count > local_ranks) or (nnodes > 1 and len(per_name) == 1)}
    return {rank: name for rank, name in hosts.items() if name not in shared}


def summarise_pairs(log: ParsedLog) -> list[PairSummary]:
    """Group connection lines by (source rank, destination rank); the sender's and receiver's lines count once."""
    hosts = rank_hosts(log)
    pairs: dict[tuple[int, int], PairSummary] = {}
    seen: set[tuple[int, int, int, int | None, str]] = set()
    for conn in log.connections:
        pair = pairs.setdefault((conn.src_rank, conn.dst_rank), PairSummary(conn.src_rank, conn.dst_rank))
        pair.lines.append(conn.line)
        key = (conn.src_rank, conn.dst_rank, conn.channel, conn.sub_channel, conn.path)
        if key in seen:
            continue
        seen.add(key)
        _count(pair, conn)
    for pair in pairs.values():
        pair.same_host = _same_host(pair, hosts)
    return [pairs[key] for key in sorted(pairs)]


def _count(pair: PairSummary, conn: Connection) -> None:
    pair.channels_by_path[conn.path] = pair.channels_by_path.get(conn.path, 0) + 1
    if conn.transport == "NET":
        pair.net_channels += 1
        pair.gdrdma_channels += int(conn.gdrdma)
    pair.read_channels += int(conn.read)


def _same_host(pair: PairSummary, hosts: dict[int, str]) -> bool | None:
    if pair.uses(MNNVL_PATH):
        return False  # NCCL prints P2P/MNNVL exactly for peers on another host of the NVLink domain
    if any(pair.uses(t) for t in INTRA_NODE_TRANSPORTS):
        return True
    src, dst = hosts.get(pair.src_rank), hosts.get(pair.dst_rank)
    if src is None or dst is None:
        return None
    return src == dst


def net_family(path: str) -> str:
    """`ib` for NCCL's IB transport and its plugins (IBext_v8...), `socket`, `efa` (AWS Libfabric), else `other`."""
    name = path.split("/", 1)[1] if "/" in path else path
    if name.startswith("IB"):
        return "ib"
    if name == "Socket":
        return "socket"
    if "Libfabric" in name or name.startswith("OFI"):
        return "efa"
    return "other"
