"""What a placement costs: the TP, CP, PP and DP collectives of one step priced on the System with the
(ranks, nodes) each group actually spans, for the chosen placement and a naive one.

With a model, the collectives are those of a real step (Megatron-LM with sequence parallelism: per layer and
micro-batch 6 all-gathers and 4 reduce-scatters for TP, 2 x interleave send/recvs per micro-batch for PP, one
gradient reduction per step for DP, or with ZeRO-3 two weight gathers and one gradient reduce-scatter per layer
and micro-batch) and the step model's time for Megatron's own order anchors the answer.
Without one, every group is priced on the same 64 MiB collective: which placement moves bytes faster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from linkscope.advise.placement import DIMS, GroupSpan, Placement, group_spans
from linkscope.model.comm.collectives import collective_time
from linkscope.model.step.compute import compute_constants
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step.layout import Layout
from linkscope.model.step.train import BF16_BYTES, Job

REFERENCE_BYTES = 64 * 2**20

CommItems = dict[str, list[tuple[str, float, float]]]
"""Per dim: (op, size in bytes as nccl-tests counts it, times per step)."""


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


def reference_items() -> CommItems:
    """The same 64 MiB collective for every group: a comparison of placements by bytes moved, no model needed."""
    return {"tp": [("all_reduce", REFERENCE_BYTES, 1)], "cp": [("all_gather", REFERENCE_BYTES, 1)],
            "pp": [("sendrecv", REFERENCE_BYTES, 1)], "dp": [("all_reduce", REFERENCE_BYTES, 1)]}


def step_items(job: Job, layout: Layout) -> CommItems:
    """The collectives of one training step for a layout, as the step model issues them."""
    m, c = job.model, compute_constants()
    tp, pp, dp, cp = layout.tp, layout.pp, layout.dp, layout.cp
    tokens = layout.micro_batch * job.seq_len / cp
    microbatches = job.global_batch / (dp * layout.micro_batch)
    layers = math.ceil(m.layers / pp)
    per_layer = layers * microbatches
    act = tokens * m.hidden * BF16_BYTES
    # Full recomputation replays the forward pass, its TP collectives included.
    replay = 1 if layout.recompute == "full" else 0
    tp_items = [("all_gather", act, (6 + 2 * replay) * per_layer),
                ("reduce_scatter", act, (4 + 2 * replay) * per_layer)]
    if not layout.sequence_parallel:
        tp_items = [("all_reduce", act, (4 + 2 * replay) * per_layer)]
    kv = 2.0 * tokens * cp * m.kv_dim / tp * BF16_BYTES
    params = (layers * m.layer_params() + m.embedding_params()) / tp
    dp_items: list[tuple[str, float, float]] = [("all_reduce", params * c.grad_bytes, 1)]
    if layout.zero >= 1:
        dp_items = [("reduce_scatter", params * c.grad_bytes, 1), ("all_gather", params * c.weight_bytes, 1)]
    if layout.zero >= 3:
        # FSDP / ZeRO-3: each layer's weights are gathered for forward and again for backward, and its
        # gradients reduce-scattered, every micro-batch.
        shard = m.layer_params() / tp
        dp_items = [("all_gather", shard * c.weight_bytes, 2 * per_layer),
                    ("reduce_scatter", shard * c.grad_bytes, per_layer)]
    return {"tp": tp_items, "cp": [("all_gather", kv, 2 * per_layer), ("reduce_scatter", kv, per_layer)],
            "pp": [("sendrecv", act / tp, 2 * layout.interleave * microbatches)], "dp": dp_items}


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
