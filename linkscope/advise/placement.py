"""Placing ranks on a topology: which GPU of which node runs each (tp, cp, dp, pp) coordinate.

Ranks are numbered as torchrun numbers them (node-major: rank = node x GPUs per node + local rank), and an
order string such as `tp-cp-dp-pp` (fastest-varying first, Megatron-Core's `order`) assigns coordinates to
ranks. With TP fastest, TP groups sit inside one node (its NVLink domain); with PP slowest, pipeline
neighbours on different nodes share the local GPU index, i.e. the same rail of a rail-optimised network.
When several stages share a node, odd nodes take their stage blocks in reverse ("snake"), which keeps the
stage that crosses to the next node on the same rail; that is expressed per node as CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.step.memory import WEIGHT_REPLICA_DIMS

DIMS = ("tp", "cp", "dp", "pp")
DEFAULT_ORDER = ("tp", "cp", "dp", "pp")
"""Megatron-Core's default rank order (without expert parallelism), fastest-varying first."""


@dataclass(frozen=True)
class Parallelism:
    """Degrees of each kind of parallelism; their product is the number of ranks."""

    tp: int
    pp: int
    dp: int
    cp: int = 1

    def size(self, dim: str) -> int:
        """The degree of `dim` (tp, cp, dp or pp)."""
        return int(getattr(self, dim))

    @property
    def world(self) -> int:
        """All ranks."""
        return self.tp * self.pp * self.dp * self.cp


def parse_order(text: str, flag: str = "--order") -> tuple[str, ...]:
    """`tp-cp-dp-pp` -> ('tp', 'cp', 'dp', 'pp'): each of tp, cp, dp, pp exactly once, fastest first."""
    dims = tuple(part.strip().lower() for part in text.split("-"))
    if sorted(dims) != sorted(DIMS):
        raise UserError(f"{flag}: '{text}' must name tp, cp, dp and pp once each, fastest-varying first "
                        "(e.g. tp-cp-dp-pp)")
    return dims


def validate_parallelism(system: System, nodes: int, par: Parallelism) -> None:
    """Every degree at least 1 and tp x pp x dp x cp equal to the GPUs of `nodes` nodes."""
    for dim in DIMS:
        if par.size(dim) < 1:
            raise UserError(f"must be at least 1 (got {par.size(dim)})", field=dim)
    if nodes < 1:
        raise UserError(f"must be at least 1 (got {nodes})", field="nodes")
    gpus = nodes * system.node.gpus
    if par.world != gpus:
        raise UserError(f"tp x pp x dp x cp = {par.tp} x {par.pp} x {par.dp} x {par.cp} = {par.world} does not "
                        f"match {nodes} nodes x {system.node.gpus} GPUs = {gpus}")


@dataclass
class Placement:
    """Rank -> coordinates, node and physical GPU (arrays indexed by rank)."""

    system: System
    par: Parallelism
    order: tuple[str, ...]
    coords: dict[str, np.ndarray]
    node: np.ndarray
    gpu: np.ndarray

    @property
    def order_text(self) -> str:
        """`tp-cp-dp-pp`."""
        return "-".join(self.order)

    def rank_rows(self) -> list[dict[str, int]]:
        """One dict per rank: rank, node, gpu and each coordinate."""
        return [{"rank": r, "node": int(self.node[r]), "gpu": int(self.gpu[r]),
                 **{d: int(self.coords[d][r]) for d in DIMS}} for r in range(self.par.world)]


def _coords(par: Parallelism, order: tuple[str, ...]) -> dict[str, np.ndarray]:
    ranks = np.arange(par.world)
    coords, stride = {}, 1
    for dim in order:
        coords[dim] = (ranks // stride) % par.size(dim)
        stride *= par.size(dim)
    return coords


def _snake_gpus(par: Parallelism, order: tuple[str, ...], gpus_per_node: int) -> np.ndarray:
    """Physical GPU per rank: the local rank, with stage blocks reversed on odd nodes when PP is slowest."""
    ranks = np.arange(par.world)
    local = ranks % gpus_per_node
    block = par.world // par.size(order[-1])
    if order[-1] != "pp" or par.pp == 1 or block >= gpus_per_node or gpus_per_node % block:
        return local
    per_node = gpus_per_node // block
    odd = (ranks // gpus_per_node) % 2 == 1
    flipped = (per_node - 1 - local // block) * block + local % block
    return np.where(odd, flipped, local)


def place(system: System, par: Parallelism, order: tuple[str, ...] = DEFAULT_ORDER) -> Placement:
    """Lay `par`'s ranks on `system` (all its nodes) in `order`."""
    gpn = system.node.gpus
    validate_parallelism(system, system.nodes, par)
    ranks = np.arange(par.world)
    return Placement(system, par, order, _coords(par, order), ranks // gpn, _snake_gpus(par, order, gpn))


def naive_order(order: tuple[str, ...]) -> tuple[str, ...]:
    """The same order with TP moved to slowest-varying: TP groups spread over nodes, the classic mistake."""
    return tuple(d for d in order if d != "tp") + ("tp",)


@dataclass(frozen=True)
class GroupSpan:
    """How the groups of one kind lie: ranks each, and the most nodes any of them spans."""

    dim: str
    ranks: int
    nodes: int

    @property
    def gpus_per_node(self) -> float:
        """Ranks of one group per node (where the group spreads evenly)."""
        return self.ranks / self.nodes


def group_dims(dim: str) -> tuple[str, ...]:
    """The coordinates a group of `dim` spans: its own, except that the data-parallel group, which reduces
    gradients, spans the weight replicas (dp x cp, as the step model reduces and shards them)."""
    return WEIGHT_REPLICA_DIMS if dim == "dp" else (dim,)


def nccl_nodes_of(p: Placement) -> np.ndarray:
    """Per rank, its node as NCCL counts them: its host, or the NVLink domain its host sits in where a domain spans
    hosts (the trays of one GB200 NVL72 rack reach each other over NVLink)."""
    if not p.system.domain_spans_nodes:
        return p.node
    _, per_domain = p.system.domain_split()
    return p.node // (per_domain // p.system.node.gpus)


def group_spans(p: Placement) -> dict[str, GroupSpan]:
    """For each dim, its group size and the largest number of nodes (as NCCL counts them) one of its groups
    spans."""
    spans = {}
    nccl_node = nccl_nodes_of(p)
    node_count = int(nccl_node.max()) + 1
    for dim in DIMS:
        members = group_dims(dim)
        # Ranks agreeing on every coordinate outside the group form one group of `dim`.
        key = np.zeros(p.par.world, dtype=np.int64)
        for d in DIMS:
            if d not in members:
                key = key * p.par.size(d) + p.coords[d]
        group_nodes = np.unique(key * node_count + nccl_node) // node_count
        ranks = int(np.prod([p.par.size(d) for d in members]))
        spans[dim] = GroupSpan(dim, ranks, int(np.bincount(group_nodes).max()))
    return spans


def rail_pairs(p: Placement) -> tuple[int, int]:
    """(pipeline neighbour pairs on different nodes, of those on the same local GPU index, i.e. rail)."""
    by_coords = {tuple(int(p.coords[d][r]) for d in DIMS): r for r in range(p.par.world)}
    crossing = same_rail = 0
    for r in range(p.par.world):
        stage = int(p.coords["pp"][r])
        if stage + 1 >= p.par.pp:
            continue
        nxt = by_coords[tuple(int(p.coords[d][r]) + (1 if d == "pp" else 0) for d in DIMS)]
        if p.node[r] != p.node[nxt]:
            crossing += 1
            same_rail += int(p.gpu[r] == p.gpu[nxt])
    return crossing, same_rail
