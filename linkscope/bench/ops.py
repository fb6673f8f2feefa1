"""The collectives linkscope measures: names, counts, algbw/busbw factors and the torch.distributed calls.

Factors and counts follow nccl-tests' `*GetBw` and `*GetCollByteCount` (reference: collectives.md 1.3-1.4).

torch.distributed has no out-of-place all_reduce, reduce or broadcast: they always work on one tensor.
linkscope's out-of-place variant of those three runs the call on a separate receive buffer that is
loaded from the send buffer before timing (and before each check), so the timed call is exactly the
library call, with no copy inside the loop. The other ops have real out-of-place forms.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from linkscope.bench.sizes import Counts
from linkscope.hardware.errors import UserError
from linkscope.results.busbw import OP_TO_BINARY, bus_factor
from linkscope.results.records import Placement

PLACEMENTS: tuple[Placement, ...] = ("out_of_place", "in_place")


@dataclass(frozen=True)
class OpSpec:
    """One collective as nccl-tests defines it."""

    name: str
    count_kind: str
    """`same`, `gather`, `scatter` or `alltoall` (see sizes.coll_counts)."""
    reducing: bool
    rooted: bool
    scales_with_ranks: bool
    """algbw counts `count * nranks` elements (all_gather, reduce_scatter, alltoall, gather, scatter)."""
    needs_peer: bool = False

    @property
    def perf_name(self) -> str:
        """The nccl-tests binary it mirrors, used in the `# Collective test starting:` marker."""
        return OP_TO_BINARY[self.name]

    def bus_factor(self, nranks: int) -> float:
        """busbw / algbw on `nranks` ranks (nccl-tests' convention, owned by results.busbw)."""
        return bus_factor(self.name, nranks)

    def algbw_bytes(self, counts: Counts, elt_bytes: int, nranks: int) -> int:
        """The byte count nccl-tests divides by the time to get algbw."""
        factor = nranks if self.scales_with_ranks else 1
        return counts.param * elt_bytes * factor

    def bandwidths(self, counts: Counts, elt_bytes: int, nranks: int, time_s: float) -> tuple[float, float]:
        """(algbw, busbw) in GB/s (10^9 bytes/s) for one operation taking `time_s`."""
        if time_s <= 0:
            return 0.0, 0.0
        algbw = self.algbw_bytes(counts, elt_bytes, nranks) / 1.0e9 / time_s
        return algbw, algbw * self.bus_factor(nranks)

    def redop_label(self, redop: str) -> str:
        """`none` for non-reducing ops, as nccl-tests prints it."""
        return redop if self.reducing else "none"

    def root_label(self, root: int) -> int:
        """-1 for unrooted ops, as nccl-tests prints it."""
        return root if self.rooted else -1

    def checks_in_place(self, backend: str) -> bool:
        """Whether the in-place result is verifiable (nccl-tests prints N/A where it is not).

        In-place alltoall overwrites data that is still to be sent. Gloo's send/recv on one buffer is
        the same race; NCCL's is checked, as nccl-tests does.
        """
        if self.name == "all_to_all":
            return False
        return not (self.name == "sendrecv" and backend == "gloo")


OPS: dict[str, OpSpec] = {
    o.name: o
    for o in (
        OpSpec("all_reduce", "same", True, False, False),
        OpSpec("all_gather", "gather", False, False, True),
        OpSpec("reduce_scatter", "scatter", True, False, True),
        OpSpec("broadcast", "same", False, True, False),
        OpSpec("reduce", "same", True, True, False),
        OpSpec("all_to_all", "alltoall", False, False, True),
        OpSpec("sendrecv", "same", False, False, False, needs_peer=True),
        OpSpec("gather", "gather", False, True, True),
        OpSpec("scatter", "scatter", False, True, True),
    )
}

_OP_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "send_recv": "sendrecv",
}


def expand_op_names(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Canonical op names for the command line's OPS (`all` = every op), duplicates removed."""
    out: list[str] = []
    for raw in names or ("all_reduce",):
        key = raw.strip().lower().replace("-", "_")
        if key.endswith("_perf"):
            key = key[: -len("_perf")]
        expanded = list(OPS) if key == "all" else [_OP_ALIASES.get(key, key)]
        for name in expanded:
            if name not in OPS:
                raise UserError(f"unknown collective '{raw}'; choose from: all, {', '.join(OPS)}")
            if name not in out:
                out.append(name)
    return tuple(out)


# torch 2.13 renamed the tensor forms (`*_single`); older releases only have the `*_tensor` names.
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

REDUCE_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}


@dataclass
class Buffers:
    """Device memory for one size: nccl-tests' sendbuff and recvbuff."""

    send: torch.Tensor
    recv: torch.Tensor


@dataclass
class Bound:
    """One op at one size and placement, ready to run.

    `call` is the single library call timed in the loop. `inputs` is where this rank's input goes for
    the check, `output` what the check compares (None where this rank's result is not defined, e.g.
    non-root ranks of reduce), `prepare` what must happen before each checked call.
    """

    call: Callable[[], object]
    inputs: torch.Tensor
    output: torch.Tensor | None
    prepare: Callable[[], object] | None = None


def alloc_buffers(counts: Counts, dtype: torch.dtype, device: torch.device) -> Buffers:
    """Allocate the send and receive buffers for one size, once, outside any timed loop."""
    return Buffers(
        send=torch.empty(counts.send, dtype=dtype, device=device),
        recv=torch.empty(counts.recv, dtype=dtype, device=device),
    )


@dataclass(frozen=True)
class Peers:
    """Who this rank is and talks to."""

    rank: int
    world: int
    root: int
    redop: str


def bind(spec: OpSpec, bufs: Buffers, counts: Counts, placement: str, peers: Peers) -> Bound:
    """Build the call for one op, size and placement."""
    binder = _BINDERS[spec.name]
    return binder(bufs, counts, placement == "in_place", peers)


def _slot(buf: torch.Tensor, index: int, base: int) -> torch.Tensor:
    return buf.narrow(0, index * base, base)


def _bind_all_reduce(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    call = functools.partial(dist.all_reduce, bufs.recv, op=REDUCE_OPS[p.redop])
    if in_place:
        return Bound(call, bufs.recv, bufs.recv)
    return Bound(call, bufs.send, bufs.recv, functools.partial(bufs.recv.copy_, bufs.send))


def _bind_reduce(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    call = functools.partial(dist.reduce, bufs.recv, dst=p.root, op=REDUCE_OPS[p.redop])
    output = bufs.recv if p.rank == p.root else None
    if in_place:
        return Bound(call, bufs.recv, output)
    return Bound(call, bufs.send, output, functools.partial(bufs.recv.copy_, bufs.send))


def _bind_broadcast(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    call = functools.partial(dist.broadcast, bufs.recv, src=p.root)
    if in_place:
        return Bound(call, bufs.recv, bufs.recv)
    return Bound(call, bufs.send, bufs.recv, functools.partial(bufs.recv.copy_, bufs.send))


def _bind_all_gather(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    src = _slot(bufs.recv, p.rank, counts.send_inplace_offset) if in_place else bufs.send
    return Bound(functools.partial(ALL_GATHER, bufs.recv, src), src, bufs.recv)


def _bind_reduce_scatter(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    dst = _slot(bufs.send, p.rank, counts.recv_inplace_offset) if in_place else bufs.recv
    call = functools.partial(REDUCE_SCATTER, dst, bufs.send, op=REDUCE_OPS[p.redop])
    return Bound(call, bufs.send, dst)


def _bind_all_to_all(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    src = bufs.recv if in_place else bufs.send
    call = functools.partial(dist.all_to_all_single, bufs.recv, src)
    return Bound(call, src, None if in_place else bufs.recv)


def _bind_gather(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    base = counts.param
    src = _slot(bufs.recv, p.rank, base) if in_place else bufs.send
    is_root = p.rank == p.root
    slots = [_slot(bufs.recv, r, base) for r in range(p.world)] if is_root else None
    call = functools.partial(dist.gather, src, gather_list=slots, dst=p.root)
    return Bound(call, src, bufs.recv if is_root else None)


def _bind_scatter(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    base = counts.param
    dst = _slot(bufs.send, p.rank, base) if in_place else bufs.recv
    slots = [_slot(bufs.send, r, base) for r in range(p.world)] if p.rank == p.root else None
    call = functools.partial(dist.scatter, dst, scatter_list=slots, src=p.root)
    return Bound(call, bufs.send, dst)


def _bind_sendrecv(bufs: Buffers, counts: Counts, in_place: bool, p: Peers) -> Bound:
    src = bufs.recv if in_place else bufs.send
    ops = [
        dist.P2POp(dist.isend, src, (p.rank + 1) % p.world),
        dist.P2POp(dist.irecv, bufs.recv, (p.rank - 1) % p.world),
    ]
    return Bound(functools.partial(_exchange, ops), src, bufs.recv)


def _exchange(ops: list[dist.P2POp]) -> None:
    # Send to rank+1 and receive from rank-1 in one group, as nccl-tests' sendrecv does.
    for work in dist.batch_isend_irecv(ops):
        work.wait()


_BINDERS: dict[str, Callable[[Buffers, Counts, bool, Peers], Bound]] = {
    "all_reduce": _bind_all_reduce,
    "reduce": _bind_reduce,
    "broadcast": _bind_broadcast,
    "all_gather": _bind_all_gather,
    "reduce_scatter": _bind_reduce_scatter,
    "all_to_all": _bind_all_to_all,
    "gather": _bind_gather,
    "scatter": _bind_scatter,
    "sendrecv": _bind_sendrecv,
}
