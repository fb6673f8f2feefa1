"""The layout search for many offerings and GPU counts at once.

`model.search.search` prices one System at one GPU count. Ranking a catalog over a range of GPU counts
would call it hundreds of times, so this module does the same work in bulk:

- enumerations (and their memory, which depends only on the layout) are cached per (GPUs, GPUs per node);
- layouts that cannot fit in the GPU's memory are dropped before the step model prices anything;
- every node count of one node type is priced in a single `estimate_steps` call. That is sound because the
  step model prices a layout from its own tp/pp/dp/cp and the node type, never from the System's node count
  (tests/advise/test_engine.py checks the batched answer against `search` on each System);
- offerings with identical node types (and no profile of their own) share one evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from linkscope.hardware.system import System
from linkscope.model.step.compute import usable_memory_gib as gpu_usable_memory_gib
from linkscope.model.step.layout import Layouts
from linkscope.model.step.memory import memory_gib_per_gpu
from linkscope.model.step.search import LayoutRequest, SearchResult, usable_layouts
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step.job import Job
from linkscope.model.step.train import StepEstimate, estimate_steps


@dataclass
class CountResult:
    """One node count of one node type: the fastest fitting layout, or how close the best came to fitting."""

    nodes: int
    enumerated: int
    best: int | None
    """Index into the node type's `SearchResult` (None when nothing fits)."""
    min_memory_gib: float | None
    """Least memory per GPU any layout needs (None when no layout is valid at all)."""


@dataclass
class NodeTypeResult:
    """Every priced layout of one node type over several node counts."""

    search: SearchResult | None
    counts: dict[int, CountResult]

    @property
    def priced(self) -> int:
        """Layouts the step model priced (those that fit in memory)."""
        return 0 if self.search is None else self.search.evaluated


def concat_layouts(parts: list[Layouts]) -> Layouts:
    """Several Layouts as one."""
    return Layouts(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Layouts)})


class LayoutPool:
    """Enumerated layouts and their memory per GPU, per (GPU count, GPUs per node as NCCL sees it), for one job."""

    def __init__(self, job: Job, request: LayoutRequest) -> None:
        self.job = job
        self.request = request
        self._cache: dict[tuple[int, int], tuple[Layouts, np.ndarray]] = {}

    def get(self, system: System) -> tuple[Layouts, np.ndarray]:
        """(layouts, memory GiB per GPU) for `system`'s GPUs (or as many per node as a layout can use)."""
        key = (system.gpus, system.nccl_node_gpus)
        if key not in self._cache:
            layouts, _ = usable_layouts(self.job, system, self.request)
            memory = memory_gib_per_gpu(self.job, system, layouts) if len(layouts) else np.zeros(0)
            self._cache[key] = (layouts, memory)
        return self._cache[key]


def usable_memory_gib(system: System) -> float:
    """What a training job may use of one GPU's memory (the framework keeps the rest)."""
    return gpu_usable_memory_gib(system.node.gpu)


def evaluate_node_type(pool: LayoutPool, system: System, node_counts: list[int], tiers: CommTiers) -> NodeTypeResult:
    """The fastest fitting layout at each node count of `system`'s node type, priced in one batch per size of
    NCCL's node (one batch, unless an NVLink domain spans nodes and the counts fill it to different depths)."""
    usable = usable_memory_gib(system)
    parts: list[Layouts] = []
    counts: dict[int, CountResult] = {}
    spans: dict[int, list[tuple[int, int, int]]] = {}
    offset = 0
    sized_counts = sorted(((system.with_nodes(n), n) for n in set(node_counts)),
                          key=lambda sn: (sn[0].nccl_node_gpus, sn[1]))
    for sized, nodes in sized_counts:  # grouped by NCCL's node, so each group's layouts are consecutive
        layouts, memory = pool.get(sized)
        keep = np.flatnonzero(memory <= usable)
        min_memory = float(memory.min()) if len(memory) else None
        counts[nodes] = CountResult(nodes, len(layouts), None, min_memory)
        if len(keep):
            parts.append(layouts.take(keep))
            spans.setdefault(sized.nccl_node_gpus, []).append((nodes, offset, offset + len(keep)))
            offset += len(keep)
    if not parts:
        return NodeTypeResult(None, counts)
    batch = concat_layouts(parts)
    estimates = []
    for group in spans.values():
        start, stop = group[0][1], group[-1][2]
        estimates.append(estimate_steps(pool.job, system.with_nodes(group[-1][0]), batch.take(np.arange(start, stop)),
                                        tiers))
        for nodes, first, last in group:
            counts[nodes].best = first + int(np.argmin(estimates[-1].step_time_s[first - start:last - start]))
    est = estimates[0] if len(estimates) == 1 else concat_estimates(estimates)
    result = SearchResult(layouts=batch, estimate=est, best=-1, evaluated=len(batch), any_fits=True)
    return NodeTypeResult(result, counts)


def concat_estimates(parts: list[StepEstimate]) -> StepEstimate:
    """Several StepEstimates of consecutive layouts as one."""
    return StepEstimate(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(StepEstimate)})
