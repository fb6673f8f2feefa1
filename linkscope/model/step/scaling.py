"""`predict scaling`: throughput, speedup and scaling efficiency from one node to N nodes.

The job's global batch is that of the largest node count. Weak scaling by default (the global batch grows
with the node count, as data-parallel training does, reaching the job's at the largest count); `strong` keeps
the global batch fixed at every count. Each node count gets its own layout, searched as `predict train`
searches it (only what the user fixed stays fixed), so a row and `predict train` on the same GPUs and global
batch give the same step time. A count where no layout fits says so and has no figures. Speedup and
efficiency start at the smallest count that fits (the baseline); when that is not one node, perfect scaling
up to the baseline is assumed, and said.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.hardware.errors import UserError
from linkscope.model.step.layout import Layout
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
                   tokens_per_s_range=p.tokens_per_s_range, range_basis=p.range_basis)


def predict_scaling(job: Job, resolved: SystemInForce, max_nodes: int, req: LayoutRequest,
                    strong: bool = False) -> tuple[list[ScalingPoint], str]:
    """A point for each node count of the resolved System, each with its own searched layout, and a note on
    the baseline."""
    counts = node_counts(max_nodes)
    points = [_point(replace(job, global_batch=global_batch_at(job.global_batch, n, max_nodes, strong)),
                     resolved.with_nodes(n), req) for n in counts]
    base = next((p for p in points if p.fits), None)
    if base is None or base.tokens_per_s is None:
        raise UserError(f"{job.model.id} fits on none of {counts[0]}..{max_nodes} nodes of {resolved.system.id}: "
                        f"{points[-1].reason}")
    note = "baseline: 1 node" if base.nodes == 1 else \
        f"baseline: {base.nodes} nodes (the smallest that fits), assuming perfect scaling below it"
    per_node_rate = base.tokens_per_s / base.nodes
    gpus_per_node = resolved.system.node.gpus
    for p in points:
        if p.fits and p.tokens_per_s is not None and p.nodes >= base.nodes:
            p.speedup = p.tokens_per_s / per_node_rate
            p.gpu_speedup = p.speedup * gpus_per_node
            p.efficiency = p.speedup / p.nodes
    return points, note + _superlinear_note(points, base)


def _model_parallel(point: ScalingPoint) -> tuple[int, ...] | None:
    par = point.parallelism
    return None if par is None else (par.tp, par.pp, par.cp)


def _superlinear_note(points: list[ScalingPoint], base: ScalingPoint) -> str:
    """Why efficiency can pass 100%: the baseline runs the layout its memory allows, and more GPUs allow faster
    ones (said so the figure is not read as a modelling slip)."""
    above = [p for p in points if p.efficiency is not None and p.efficiency > SUPERLINEAR_EFFICIENCY
             and _model_parallel(p) != _model_parallel(base)]
    if not above or base.mfu is None:
        return ""
    counts = ", ".join(str(p.nodes) for p in above)
    return (f"; efficiency above 100% at {counts} nodes: the baseline runs the layout its memory allows "
            f"(MFU {base.mfu:.0%}), and more GPUs free memory for faster layouts")
