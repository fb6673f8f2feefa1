"""`predict scaling`: throughput, speedup and scaling efficiency from one node to N nodes.

The job's global batch is that of the largest node count. Weak scaling by default (the global batch grows
with the node count, as data-parallel training does, reaching the job's at the largest count): each node count
gets its own layout, searched as `predict train` searches it (only what the user fixed stays fixed), so a row
and `predict train` on the same GPUs and global batch give the same step time. `strong` keeps the global batch
fixed at every count and, from the baseline on, the baseline's layout too (model parallelism, interleave,
micro-batch, recomputation, ZeRO, experts): only the data-parallel degree grows, so the efficiency measures the
scaling and not a better layout (a row is `predict train` with those values given). A count where no layout
fits says so and has no figures. Speedup and efficiency start at the smallest count that fits (the baseline);
when that is not one node, perfect scaling up to the baseline is assumed, and said. An efficiency above 100% is
explained in the note by what differs from the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.hardware.errors import UserError
from linkscope.model.step.layout import Layout
from linkscope.model.ranges.mfu import MfuPeak
from linkscope.model.step.predict import SystemInForce, predict_train_on
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.job import Job


@dataclass
class ScalingPoint:
    """One node count: its chosen layout and figures, or (fits False) why there are none."""

    nodes: int
    gpus: int
    global_batch: int
    fits: bool
    step_time_s: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    parallelism: Layout | None = None
    speedup: float | None = None
    """Throughput relative to one node's share of the baseline (None below the baseline)."""
    gpu_speedup: float | None = None
    """Throughput relative to one GPU's share of the baseline (the seeds' 'speedup 62.3 on 64 GPUs')."""
    efficiency: float | None = None
    step_time_s_range: list[float] = field(default_factory=list)
    """p10..p90 of the step time (training predictions' leave-one-source-out errors)."""
    tokens_per_s_range: list[float] = field(default_factory=list)
    reason: str | None = None
    """Why a count has no figures: nothing fits in memory, or no layout divides the job."""
    range_basis: str = ""
    """What evidence the ranges come from, or that there is none (`model.ranges.accuracy.spread`)."""
    range_note: str | None = None
    """What a user must know about the ranges (far from all evidence, widened), as `predict train` flags it."""
    breakdown: dict[str, float] = field(default_factory=dict)
    """Where the step time goes (`predict train`'s breakdown)."""
    mfu_peak_tflops: float = 0.0
    """The dense peak the MFU is taken against (model/ranges/mfu.py); 0 without figures."""
    mfu_precision: str = ""

    @property
    def peak(self) -> MfuPeak:
        """The peak the MFU is taken against."""
        return MfuPeak(gpu="", family="", precision=self.mfu_precision, tflops=self.mfu_peak_tflops)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.__dict__, "parallelism": self.parallelism.as_dict() if self.parallelism else None}


def node_counts(max_nodes: int) -> list[int]:
    """1, 2, 4, ... up to max_nodes, with max_nodes itself last."""
    if max_nodes < 1:
        raise UserError(f"must be at least 1 (got {max_nodes})", field="nodes")
    counts, n = [], 1
    while n < max_nodes:
        counts.append(n)
        n *= 2
    return [*counts, max_nodes]


SUPERLINEAR_EFFICIENCY = 1.005
"""Efficiency above this is explained in the note (rounding alone stays under it)."""


def global_batch_at(global_batch: int, nodes: int, max_nodes: int, strong: bool) -> int:
    """The global batch at `nodes` of a study whose largest count runs `global_batch` sequences per step."""
    return global_batch if strong else max(1, round(global_batch * nodes / max_nodes))


def _point(job: Job, resolved: SystemInForce, req: LayoutRequest) -> ScalingPoint:
    """The count of `resolved` as `predict train` answers it, or a point without figures saying why."""
    system = resolved.system
    base = ScalingPoint(nodes=system.nodes, gpus=system.gpus, global_batch=job.global_batch, fits=False)
    try:
        p = predict_train_on(job, resolved, req)
    except UserError as exc:
        return replace(base, reason=str(exc))
    if not p.fits:
        least_gib = p.least_memory_gib_per_gpu if p.least_memory_gib_per_gpu is not None else p.memory_gib_per_gpu
        return replace(base, reason=f"does not fit in memory: needs {least_gib:.0f} GiB per GPU at best, "
                                    f"{p.memory_gib_available:.0f} GiB usable")
    return replace(base, gpus=p.gpus, fits=True, step_time_s=p.step_time_s, tokens_per_s=p.tokens_per_s, mfu=p.mfu,
                   parallelism=p.parallelism, step_time_s_range=p.step_time_s_range,
                   tokens_per_s_range=p.tokens_per_s_range, range_basis=p.range_basis, range_note=p.range_note,
                   breakdown=p.breakdown, mfu_peak_tflops=p.mfu_peak_tflops, mfu_precision=p.mfu_precision)


def held(layout: Layout) -> LayoutRequest:
    """The baseline's layout with only the data-parallel degree left to the count: what strong scaling holds."""
    return LayoutRequest(tp=layout.tp, pp=layout.pp, dp=None, cp=layout.cp, interleave=layout.interleave,
                         micro_batch=layout.micro_batch, recompute=layout.recompute, zero=layout.zero,
                         sequence_parallel=layout.sequence_parallel, ep=layout.ep, etp=layout.etp)


def _hold_baseline(job: Job, resolved: SystemInForce, points: list[ScalingPoint], base: ScalingPoint) -> str:
    """Strong scaling: every count above the baseline rerun with the baseline's layout; a count where it cannot
    run keeps its own searched layout, and the returned note says which and why."""
    assert base.parallelism is not None
    req, kept = held(base.parallelism), []
    for i, p in enumerate(points):
        if p.nodes <= base.nodes:
            continue
        fixed = _point(job, resolved.with_nodes(p.nodes), req)
        if fixed.fits:
            points[i] = fixed
        else:
            kept.append(f"{p.nodes} ({fixed.reason})")
    par = base.parallelism
    text = (f"; strong scaling holds the baseline's layout (tp {par.tp}, pp {par.pp}, cp {par.cp}, interleave "
            f"{par.interleave}, micro-batch {par.micro_batch}, recompute {par.recompute}, ZeRO-{par.zero}"
            + (f", ep {par.ep} x etp {par.etp}" if par.ep * par.etp > 1 else "") + "): only dp grows")
    if kept:
        text += f"; searched afresh where it cannot run, at {', '.join(kept)} nodes"
    return text


def predict_scaling(job: Job, resolved: SystemInForce, max_nodes: int, req: LayoutRequest,
                    strong: bool = False) -> tuple[list[ScalingPoint], str]:
    """A point for each node count of the resolved System (weak: each with its own searched layout; strong: with
    the baseline's), and a note on the baseline and on any efficiency above 100%."""
    counts = node_counts(max_nodes)
    points = [_point(replace(job, global_batch=global_batch_at(job.global_batch, n, max_nodes, strong)),
                     resolved.with_nodes(n), req) for n in counts]
    base = next((p for p in points if p.fits), None)
    if base is None or base.tokens_per_s is None:
        raise UserError(f"{job.model.id} fits on none of {counts[0]}..{max_nodes} nodes of {resolved.system.id}: "
                        f"{points[-1].reason}")
    note = "baseline: 1 node" if base.nodes == 1 else \
        f"baseline: {base.nodes} nodes (the smallest that fits), assuming perfect scaling below it"
    if strong:
        note += _hold_baseline(job, resolved, points, base)
    per_node_rate = base.tokens_per_s / base.nodes
    gpus_per_node = resolved.system.node.gpus
    for p in points:
        if p.fits and p.tokens_per_s is not None and p.nodes >= base.nodes:
            p.speedup = p.tokens_per_s / per_node_rate
            p.gpu_speedup = p.speedup * gpus_per_node
            p.efficiency = p.speedup / p.nodes
    return points, note + _superlinear_note(points, base)


LAYOUT_FIELDS = {"tp": "tp", "pp": "pp", "cp": "cp", "interleave": "interleave", "micro_batch": "micro-batch",
                 "recompute": "recompute", "zero": "ZeRO", "sequence_parallel": "sequence parallel", "ep": "ep",
                 "etp": "etp"}
"""The layout's choices other than dp, as the note names them."""

SHARES = {"bubble_s": "the pipeline bubble", "optimizer_s": "the optimizer step (ZeRO shards it over the "
          "data-parallel ranks)", "recompute_s": "recomputation", "dp_comm_exposed_s": "data-parallel traffic",
          "tp_comm_exposed_s": "tensor-parallel traffic", "pp_comm_exposed_s": "pipeline sends",
          "ep_comm_exposed_s": "expert dispatch and combine", "cp_comm_exposed_s": "context-parallel traffic",
          "moe_fixed_s": "the MoE layers' fixed time"}
"""The parts of a step that can shrink faster than the GPUs grow, as the note names them."""


def _changes(point: ScalingPoint, base: ScalingPoint) -> list[str]:
    """What of the layout differs from the baseline's, dp aside: `pp 2 -> 1`, `micro-batch 4 -> 8`."""
    a, b = base.parallelism, point.parallelism
    if a is None or b is None:
        return []
    return [f"{name} {getattr(a, f)} -> {getattr(b, f)}" for f, name in LAYOUT_FIELDS.items()
            if getattr(a, f) != getattr(b, f)]


def _share(p: ScalingPoint, key: str) -> float:
    return p.breakdown.get(key, 0.0) / p.step_time_s if p.step_time_s else 0.0


def _shrunk(point: ScalingPoint, base: ScalingPoint) -> str | None:
    """The part of the step whose share of it fell the most from the baseline (None when none fell)."""
    gains = {k: _share(base, k) - _share(point, k) for k in SHARES}
    key = max(gains, key=lambda k: gains[k])
    return key if gains[key] > 0 else None


def _superlinear_note(points: list[ScalingPoint], base: ScalingPoint) -> str:
    """Why efficiency passes 100% at each count where it does: what of the layout differs from the baseline's (the
    baseline runs the best layout its GPUs allow, and more GPUs allow faster ones), or, with the same layout, the
    part of the step whose share fell (each GPU then spends more of its time computing). Counts with the same
    reason share one clause."""
    by_change: dict[str, list[int]] = {}
    by_part: dict[str | None, list[ScalingPoint]] = {}
    for p in points:
        if p.efficiency is None or p.efficiency <= SUPERLINEAR_EFFICIENCY:
            continue
        changes = _changes(p, base)
        if changes:
            by_change.setdefault(", ".join(changes), []).append(p.nodes)
        else:
            by_part.setdefault(_shrunk(p, base), []).append(p)
    clauses = [(counts, f"the layout differs from the baseline's ({changes}): the baseline runs the best layout "
                        f"its GPUs allow (MFU {base.mfu:.0%} of {base.peak.label}), and more GPUs (more memory, other "
                        "divisors) allow a "
                        "faster one") for changes, counts in by_change.items()]
    for part, shown in by_part.items():
        shares = ", ".join(f"{_share(p, part):.1%} at {p.nodes}" for p in shown) if part else ""
        clauses.append(([p.nodes for p in shown], f"the same layout, and {SHARES[part]} takes a smaller share of the "
                        f"step ({_share(base, part):.1%} at the baseline, {shares})" if part else
                        "the same layout; the collectives' algorithms suit the larger groups better"))
    return "".join(f"; efficiency above 100% at {', '.join(map(str, sorted(counts)))} nodes: {reason}"
                   for counts, reason in sorted(clauses))
