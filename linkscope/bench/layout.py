"""Where each rank runs: torchrun's environment, the per-rank identity, nodes and node groups.

Pure functions over plain data, so they are tested without starting any process.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")


@dataclass(frozen=True)
class RankEnv:
    """A rank's place in the job, as torchrun (or linkscope's own launcher) assigns it."""

    rank: int
    world: int
    local_rank: int
    local_world: int
    node_rank: int | None
    """torchrun's GROUP_RANK; None when unknown (nodes are then told apart by hostname)."""


def torchrun_env(environ: Mapping[str, str] | None = None) -> RankEnv | None:
    """The rank's identity when started by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR set)."""
    env = os.environ if environ is None else environ
    if not all(name in env for name in TORCHRUN_VARS):
        return None
    group = env.get("GROUP_RANK")
    return RankEnv(
        rank=int(env["RANK"]),
        world=int(env["WORLD_SIZE"]),
        local_rank=int(env["LOCAL_RANK"]),
        local_world=int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])),
        node_rank=int(group) if group not in (None, "") else None,
    )


@dataclass(frozen=True)
class RankInfo:
    """What rank 0 learns about every rank: for the `# Using devices` lines and the stored layout."""

    rank: int
    local_rank: int
    node_rank: int | None
    host: str
    pid: int
    device_index: int
    device_bus: str
    """nccl-tests prints the PCI bus id in brackets; `cpu` for CPU ranks."""
    device_name: str


def local_rank_info(env: RankEnv, device_index: int, device_bus: str, device_name: str) -> RankInfo:
    """This process's RankInfo."""
    return RankInfo(
        rank=env.rank,
        local_rank=env.local_rank,
        node_rank=env.node_rank,
        host=socket.gethostname(),
        pid=os.getpid(),
        device_index=device_index,
        device_bus=device_bus,
        device_name=device_name,
    )


def node_keys(infos: list[RankInfo]) -> list[str]:
    """One key per rank naming its node: torchrun's GROUP_RANK when every rank has one, else the host."""
    if all(info.node_rank is not None for info in infos):
        return [f"node{info.node_rank}" for info in infos]
    return [info.host for info in infos]


def rank_groups(infos: list[RankInfo]) -> dict[str, Any]:
    """The stored layout: host and local rank per rank, intra-node and inter-node groups.

    Intra-node groups are the ranks sharing a node; inter-node groups are the ranks with the same local
    rank on different nodes (the rings that cross the scale-out fabric in a hierarchical collective).
    """
    ordered = sorted(infos, key=lambda info: info.rank)
    keys = node_keys(ordered)
    intra: dict[str, list[int]] = {}
    inter: dict[int, list[int]] = {}
    for info, key in zip(ordered, keys):
        intra.setdefault(key, []).append(info.rank)
        inter.setdefault(info.local_rank, []).append(info.rank)
    return {
        "hosts": [info.host for info in ordered],
        "local_ranks": [info.local_rank for info in ordered],
        "node_of_rank": keys,
        "intra_node": list(intra.values()),
        "inter_node": [inter[k] for k in sorted(inter)],
        "ranks": [_rank_record(info, key) for info, key in zip(ordered, keys)],
    }


def _rank_record(info: RankInfo, node: str) -> dict[str, Any]:
    # Keys as nccl-tests' JSON `devices` has them where it has them (exporters rename host/bus_id/name).
    return {
        "rank": info.rank,
        "group": 0,
        "pid": info.pid,
        "host": info.host,
        "device": info.device_index,
        "bus_id": info.device_bus,
        "name": info.device_name,
        "local_rank": info.local_rank,
        "node": node,
    }


def distinct_hosts(infos: list[RankInfo]) -> list[str]:
    """Host names in rank order, each once."""
    seen: list[str] = []
    for info in sorted(infos, key=lambda i: i.rank):
        if info.host not in seen:
            seen.append(info.host)
    return seen


def node_count(infos: list[RankInfo]) -> int:
    """How many nodes the ranks span."""
    return len(set(node_keys(infos)))
