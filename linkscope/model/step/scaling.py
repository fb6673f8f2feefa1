"""`predict scaling`: throughput, speedup and scaling efficiency from one node to N nodes.

The job's global batch is that of the largest node count. Weak scaling by default (the global batch grows
with the node count, as data-parallel training does, reaching the job's at the largest count); `strong` keeps
the global batch fixed at every count. Each node count gets its own best layout. When the job does not fit on
one node, the smallest node count that fits is the baseline and speedups are relative to it, scaled by its
node count (perfect scaling up to the baseline is assumed, and said).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.step.layout import Layout
from linkscope.model.step.predict import summarize
from linkscope.model.step.search import LayoutRequest, search
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step.job import Job


@dataclass
class ScalingPoint:
    """One node count."""

    nodes: int
    gpus: int
    global_batch: int
    step_time_s: float
    tokens_per_s: float
    mfu: float
    fits: bool
    parallelism: Layout
    speedup: float = 0.0
    """Throughput relative to one node."""
    gpu_speedup: float = 0.0
    """Throughput relative to one GPU's share of a node (the seeds' 'speedup 62.3 on 64 GPUs')."""
    efficiency: float = 0.0
    step_time_s_range: list[float] = field(default_factory=list)
    """p10..p90 of the step time (training predictions' leave-one-source-out errors)."""
    tokens_per_s_range: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.__dict__, "parallelism": self.parallelism.as_dict()}


def node_counts(max_nodes: int) -> list[int]:
    """1, 2, 4, ... up to max_nodes, with max_nodes itself last."""
    if max_nodes < 1:
        raise UserError(f"must be at least 1 (got {max_nodes})", field="nodes")
    counts, n = [], 1
    while n < max_nodes:
        counts.append(n)
        n *= 2
    return [*counts, max_nodes]


def global_batch_at(global_batch: int, nodes: int, max_nodes: int, strong: bool) -> int:
    """The global batch at `nodes` of a study whose largest count runs `global_batch` sequences per step."""
    return global_batch if strong else max(1, round(global_batch * nodes / max_nodes))


def _point(job: Job, system: System, req: LayoutRequest, tiers: CommTiers | None) -> ScalingPoint:
    result = search(job, system, req, tiers)
    p = summarize(job, system, result)
    return ScalingPoint(nodes=system.nodes, gpus=system.gpus, global_batch=job.global_batch,
                        step_time_s=p.step_time_s, tokens_per_s=p.tokens_per_s, mfu=p.mfu, fits=p.fits,
                        parallelism=p.parallelism, step_time_s_range=p.step_time_s_range,
                        tokens_per_s_range=p.tokens_per_s_range)


def _fixed_layout(point: ScalingPoint) -> LayoutRequest:
    """The baseline's replica layout with only the data-parallel size left open."""
    par = point.parallelism
    return LayoutRequest(tp=par.tp, pp=par.pp, dp=None, cp=par.cp, interleave=par.interleave,
                         micro_batch=par.micro_batch, recompute=par.recompute, zero=par.zero,
                         sequence_parallel=par.sequence_parallel)


def predict_scaling(job: Job, system: System, max_nodes: int, req: LayoutRequest, strong: bool = False,
                    tiers: CommTiers | None = None) -> tuple[list[ScalingPoint], str]:
    """Points for each node count and a note on the baseline.

    The baseline (the smallest node count that fits) gets the best layout; larger counts keep its replica
    layout and add data-parallel replicas, as a scaling study does, so the efficiency isolates communication.
    """
    counts = node_counts(max_nodes)
    points: list[ScalingPoint] = []
    base: ScalingPoint | None = None
    for n in counts:
        sized = replace(job, global_batch=global_batch_at(job.global_batch, n, max_nodes, strong))
        try:
            point = _point(sized, system.with_nodes(n), _fixed_layout(base) if base else replace(req, dp=None), tiers)
        except UserError:
            continue
        points.append(point)
        if base is None and point.fits:
            base = point
    if base is None:
        raise UserError(f"{job.model.id} fits on none of {counts[0]}..{max_nodes} nodes of {system.id}")
    note = "baseline: 1 node" if base.nodes == 1 else \
        f"baseline: {base.nodes} nodes (the smallest that fits), assuming perfect scaling below it"
    per_node_rate = base.tokens_per_s / base.nodes
    for p in points:
        p.speedup = p.tokens_per_s / per_node_rate if p.fits else 0.0
        p.gpu_speedup = p.speedup * system.node.gpus
        p.efficiency = p.speedup / p.nodes
    return points, note
