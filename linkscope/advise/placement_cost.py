"""What a placement costs: the TP, CP, PP and DP collectives of one step priced on the System with the
(ranks, nodes) each group actually spans, for the chosen placement and a naive one.

With a model, the collectives are those of a real step (`model/step/step_collectives.py` lists them) and the
step model's time for Megatron's own order anchors the answer. Without one, every group is priced on the same
64 MiB collective: which placement moves bytes faster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from linkscope.advise.placement import DIMS, GroupSpan, Placement, group_spans
from linkscope.model.comm.collectives import collective_time
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step.step_collectives import CommItems



@dataclass
class DimCost:
    """One kind of group under one placement."""

    dim: str
    ranks: int
    nodes: int
    time_s: float
    limit: str
    """What bounds its largest collective: nvlink, pcie, network (fabric), latency."""


@dataclass
class PlacementCost:
    """Every group's collective time under one placement."""

    order: str
    dims: dict[str, DimCost] = field(default_factory=dict)

    @property
    def critical_s(self) -> float:
        """TP, CP and PP: on the critical path of every micro-batch."""
        return sum(self.dims[d].time_s for d in ("tp", "cp", "pp"))

    @property
    def dp_s(self) -> float:
        """DP: once per step, partly hidden behind the last backward pass."""
        return self.dims["dp"].time_s

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"order": self.order, "critical_s": self.critical_s, "dp_s": self.dp_s,
                "groups": {d: dict(c.__dict__) for d, c in self.dims.items()}}


def _dim_cost(span: GroupSpan, items: list[tuple[str, float, float]], tiers: CommTiers) -> DimCost:
    if span.ranks <= 1:
        return DimCost(span.dim, span.ranks, span.nodes, 0.0, "none")
    times, limits = [], []
    for op, size, count in items:
        cand = collective_time(op, tiers, np.asarray([size]), span.ranks, span.nodes)
        times.append(float(cand.time_us[0]) * 1e-6 * count)
        limits.append(str(cand.bottleneck[0]))
    return DimCost(span.dim, span.ranks, span.nodes, sum(times), limits[int(np.argmax(times))])


def price_placement(p: Placement, tiers: CommTiers, items: CommItems) -> PlacementCost:
    """Each group's collectives on the nodes its groups span."""
    spans = group_spans(p)
    return PlacementCost(p.order_text, {d: _dim_cost(spans[d], items[d], tiers) for d in DIMS})
