"""Communication in a training trace: time per collective kind and the part not overlapped by compute.

The overlap definition is HolisticTraceAnalysis's (`get_comm_comp_overlap`): per rank, over the whole trace,
the union of communication intervals, the union of computation intervals, and their intersection; exposed
communication is the communication union minus that intersection. On GPU traces the intervals are kernels
(events with a CUDA stream), classified by HTA's name patterns, and like HTA only the kernels launched before
the last `ProfilerStep` are counted. On CPU ranks (gloo) there are no kernels: communication is gloo's work on
its own threads (`gloo:<op>` ranges) and computation is the operators of the training threads.

Every pattern lives here, once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from linkscope.results.kineto import TraceHeader, iter_events

# HolisticTraceAnalysis hta/common/types.py (0.5.0): communication, memory, and what is not computation.
COMM_KERNEL = re.compile(r"(^nccl)")
MEMORY_KERNEL = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
NOT_COMPUTE = re.compile(r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(cuda.*LaunchKernel)|(^runFunction)")
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)")
GLOO_RANGE = re.compile(r"^gloo:(\w+)")
# Operators of the training thread that wait for communication rather than compute.
CPU_WAIT_OP = re.compile(r"(^c10d::)|(^record_param_comms)|([Ww]ait)|(^ProfilerStep)")
# NCCL kernel names hint at the first operation only (NVIDIA/nccl#739); `Collective name` is preferred.
NCCL_KIND = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+?)(?:_|\(|$)")
_KIND_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv", "alltoall": "all_to_all",
               "alltoall_base": "all_to_all", "_allgather_base": "all_gather", "allgather_into_tensor_coalesced":
               "all_gather", "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced":
               "reduce_scatter", "gather": "gather", "scatter": "scatter", "send": "sendrecv", "recv": "sendrecv"}

Interval = tuple[float, float]


def collective_kind(name: str, args: dict[str, Any] | None = None) -> str:
    """`all_reduce`, `all_gather`, ... from the event's `Collective name`, else from its name; `other` if neither."""
    label = (args or {}).get("Collective name")
    if not label:
        match = NCCL_KIND.search(name) or GLOO_RANGE.match(name)
        label = match.group(1) if match else ""
    key = str(label).lower()
    return _KIND_NAMES.get(key, _KIND_NAMES.get(key.replace("_", ""), key or "other"))


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Union of intervals as sorted, disjoint intervals (touching ones merge, as HTA merges them)."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def length(intervals: list[Interval]) -> float:
    """Total length of disjoint intervals."""
    return sum(b - a for a, b in intervals)


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of disjoint sorted intervals `a` outside disjoint sorted intervals `b`."""
    out: list[Interval] = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k, cursor = j, start
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def intersection(a: list[Interval], b: list[Interval]) -> float:
    """Length of the intersection of two disjoint, sorted interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass
class RankComm:
    """One rank's trace, reduced to what the overlap analysis needs (times in µs, as Kineto writes them)."""

    rank: int | None
    source: str
    """`gpu` (kernels) or `cpu` (gloo threads and operators)."""
    comm: dict[str, list[Interval]] = field(default_factory=dict)
    compute: list[Interval] = field(default_factory=list)
    steps: int = 0
    path: str = ""

    def comm_union(self) -> list[Interval]:
        """Every communication interval, all kinds merged."""
        return merge(iv for ivs in self.comm.values() for iv in ivs)

    def overlap_pct(self) -> float | None:
        """HTA's `comp_comm_overlap_pctg`: compute during communication over communication, in %."""
        comm = self.comm_union()
        total = length(comm)
        if total <= 0:
            return None
        return 100.0 * intersection(comm, merge(self.compute)) / total


class _Collector:
    """Keeps only intervals, correlation ids and step starts while the events stream past."""

    def __init__(self, hta_rounding: bool) -> None:
        self.hta_rounding = hta_rounding
        self.kernels: list[tuple[float, float, str, int, dict[str, Any]]] = []
        self.launch_ts: dict[int, float] = {}
        self.step_starts: list[float] = []
        self.gloo: list[tuple[float, float, str, Any]] = []
        self.cpu_ops: list[tuple[float, float, Any]] = []
        self.cpu_waits: list[tuple[float, float, Any]] = []

    def visit(self, ev: dict[str, Any]) -> None:
        if ev.get("ph") != "X":
            return
        args = ev.get("args") or {}
        ts, dur, name = float(ev.get("ts", 0.0)), float(ev.get("dur", 0.0)), str(ev.get("name", ""))
        if self.hta_rounding:
            ts, dur = _hta_rounded(ts, dur)
        stream = args.get("stream")
        if stream is not None and int(stream) >= 0 and int(args.get("correlation", -1)) >= 0:
            self.kernels.append((ts, dur, name, int(args["correlation"]), args))
            return
        if "correlation" in args:
            self.launch_ts[int(args["correlation"])] = ts
        if ev.get("cat") == "gpu_user_annotation":
            return  # the GPU-side projection of CPU ranges (ProfilerStep, nccl:*): neither kernel nor step mark
        if PROFILER_STEP.match(name):
            self.step_starts.append(ts)
        elif GLOO_RANGE.match(name):
            self.gloo.append((ts, ts + dur, name, ev.get("tid")))
        elif ev.get("cat") == "cpu_op":
            target = self.cpu_waits if CPU_WAIT_OP.search(name) else self.cpu_ops
            target.append((ts, ts + dur, ev.get("tid")))


def _hta_rounded(ts: float, dur: float) -> tuple[float, float]:
    """HTA 0.5.0 reads fractional-µs traces as [ceil(ts), floor(ts + dur)] (its workaround for pytorch#122425)."""
    start, end = math.ceil(ts), math.floor(ts + dur)
    return float(start), float(max(end - start, 0))


def read_rank(path: Path, hta_rounding: bool = False) -> RankComm:
    """Stream one rank's trace and keep its communication and computation intervals.

    `hta_rounding` reproduces HTA 0.5.0's integer-µs reading exactly (for cross-checks); by default the trace's
    own resolution is kept."""
    header = TraceHeader()
    col = _Collector(hta_rounding)
    for event in iter_events(path, header):
        col.visit(event)
    steps = max(len(col.step_starts), 1)
    if col.kernels:
        return _gpu_rank(col, header.rank, steps, str(path))
    return _cpu_rank(col, header.rank, steps, str(path))


def _gpu_rank(col: _Collector, rank: int | None, steps: int, path: str) -> RankComm:
    out = RankComm(rank, "gpu", steps=steps, path=path)
    kernels = col.kernels
    if len(col.step_starts) > 1:
        # HTA counts kernels launched before the last ProfilerStep began (include_last_profiler_step=False).
        last = max(col.step_starts)
        kernels = [k for k in kernels if col.launch_ts.get(k[3], float("inf")) < last]
        out.steps = len(col.step_starts) - 1
    for ts, dur, name, _, args in kernels:
        if COMM_KERNEL.search(name):
            out.comm.setdefault(collective_kind(name, args), []).append((ts, ts + dur))
        elif not MEMORY_KERNEL.search(name) and not NOT_COMPUTE.search(name):
            out.compute.append((ts, ts + dur))
    return out


def _cpu_rank(col: _Collector, rank: int | None, steps: int, path: str) -> RankComm:
    out = RankComm(rank, "cpu", steps=steps, path=path)
    comm_threads = {tid for *_, tid in col.gloo}
    for start, end, name, _ in col.gloo:
        out.comm.setdefault(collective_kind(name), []).append((start, end))
    busy = merge((a, b) for a, b, tid in col.cpu_ops if tid not in comm_threads)
    # A synchronous collective waits inside the operator that issued it (a tensor-parallel linear layer, say);
    # that wait is not compute.
    waits = merge((a, b) for a, b, tid in col.cpu_waits if tid not in comm_threads)
    out.compute = subtract(busy, waits)
    return out


@dataclass
class CommSummary:
    """Per-step communication of one rank, seconds."""

    rank: int
    comm_s: dict[str, float]
    exposed_comm_s: dict[str, float]
    compute_s: float
    overlap_pct: float | None
    steps: int
    path: str


def summarize_rank(rc: RankComm, fallback_rank: int) -> CommSummary:
    """Seconds per traced step: each kind's communication and its exposed part, and the compute time."""
    compute = merge(rc.compute)
    per_step = 1e-6 / max(rc.steps, 1)
    comm_s, exposed_s = {}, {}
    for kind, ivs in sorted(rc.comm.items()):
        union = merge(ivs)
        comm_s[kind] = length(union) * per_step
        exposed_s[kind] = (length(union) - intersection(union, compute)) * per_step
    return CommSummary(rank=rc.rank if rc.rank is not None else fallback_rank, comm_s=comm_s,
                       exposed_comm_s=exposed_s, compute_s=length(compute) * per_step,
                       overlap_pct=rc.overlap_pct(), steps=rc.steps, path=rc.path)


@dataclass
class TraceReport:
    """Every rank's communication, the mean over ranks, and the slowest rank."""

    ranks: list[CommSummary]
    comm_s: dict[str, float]
    exposed_comm_s: dict[str, float]
    slowest_rank: int | None
    held_back_s: float
    """How much longer the slowest rank computes per step than the mean of the others: time they wait for it."""
    source: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"ranks": [r.__dict__ for r in self.ranks], "comm_s": self.comm_s,
                "exposed_comm_s": self.exposed_comm_s, "slowest_rank": self.slowest_rank,
                "held_back_s": self.held_back_s, "source": self.source}


def _mean_by_kind(values: list[dict[str, float]]) -> dict[str, float]:
    kinds = sorted({k for v in values for k in v})
    return {k: sum(v.get(k, 0.0) for v in values) / len(values) for k in kinds}


def analyze(paths: list[Path]) -> TraceReport:
    """Read every rank's trace and summarise it."""
    rcs = [read_rank(p) for p in paths]
    ranks = [summarize_rank(rc, i) for i, rc in enumerate(rcs)]
    slowest, held = None, 0.0
    if len(ranks) > 1:
        top = max(ranks, key=lambda r: r.compute_s)
        others = [r.compute_s for r in ranks if r is not top]
        slowest, held = top.rank, max(0.0, top.compute_s - sum(others) / len(others))
    return TraceReport(ranks=ranks, comm_s=_mean_by_kind([r.comm_s for r in ranks]),
                       exposed_comm_s=_mean_by_kind([r.exposed_comm_s for r in ranks]), slowest_rank=slowest,
                       held_back_s=held, source=rcs[0].source if rcs else "cpu")
