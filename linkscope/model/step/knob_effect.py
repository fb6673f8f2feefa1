"""What a job's data-parallel knobs cost and save on one layout: the step with and without them, the exposed
data-parallel time left after overlap, the GPU time the knobs add, their memory and the bytes each GPU sends per
step on each tier (scale-up inside the node or NVLink domain, scale-out across it).

The same layout is priced twice (knobs on, knobs off), so the difference is the knobs' alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from linkscope.hardware.system import System
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step import knobs as knob_rules
from linkscope.model.step.job import Job
from linkscope.model.step.layout import MEGATRON_ORDER, Layout, layouts_of, order_spans
from linkscope.model.step.memory import gradient_bytes
from linkscope.model.step.step_collectives import step_items
from linkscope.model.step.train import estimate_steps

GRADIENT_OPS = ("all_reduce", "reduce_scatter")


@dataclass(frozen=True)
class KnobEffect:
    """The knobs' effect on one layout (seconds per step, GiB per GPU, bytes per GPU per step)."""

    knobs: dict[str, Any]
    label: str
    baseline_step_time_s: float
    step_time_s: float
    saved_s: float
    """Baseline minus with the knobs: positive when they help."""
    dp_comm_exposed_s_before: float
    dp_comm_exposed_s_after: float
    knob_compute_s: float
    memory_gib_added: float
    bytes_per_gpu_before: dict[str, float]
    """Data-parallel bytes each GPU sends per step, per tier (`scale_up`, `scale_out`)."""
    bytes_per_gpu_after: dict[str, float]
    optimisation: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dict(self.__dict__)

    def sentences(self) -> list[str]:
        """What the knobs cost and save, in words, for the terminal."""
        before, after = sum(self.bytes_per_gpu_before.values()), sum(self.bytes_per_gpu_after.values())
        tiers = ", ".join(f"{tier} {self.bytes_per_gpu_before.get(tier, 0) / 1e9:.3g} -> {value / 1e9:.3g} GB"
                          for tier, value in self.bytes_per_gpu_after.items())
        lines = [f"{self.label}: data-parallel bytes per GPU per step {before / 1e9:.3g} -> {after / 1e9:.3g} GB "
                 f"({tiers}); exposed DP communication {self.dp_comm_exposed_s_before:.3g} -> "
                 f"{self.dp_comm_exposed_s_after:.3g} s; encode/decode {self.knob_compute_s:.3g} s; "
                 f"+{self.memory_gib_added:.2f} GiB per GPU; step {self.baseline_step_time_s:.4g} -> "
                 f"{self.step_time_s:.4g} s ({'saves' if self.saved_s >= 0 else 'costs'} {abs(self.saved_s):.3g} s)"]
        if self.optimisation:
            lines.append(f"changes the optimisation: {self.optimisation}")
        return lines


def _wire_bytes(op: str, size: float, ranks: int) -> float:
    """Bytes one rank sends for one collective of `size` over `ranks` (ring: nccl-tests' busbw factors)."""
    if ranks <= 1:
        return 0.0
    share = 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks
    return share * size


def dp_bytes_per_tier(job: Job, system: System, layout: Layout) -> dict[str, float]:
    """Data-parallel bytes each GPU sends per step, per tier, with the job's knobs (the collectives of
    `step_items`, scaled by the knobs' wire factors; ZeRO++ hp moves the backward gather onto the node)."""
    base = replace(job, knobs=knob_rules.Knobs())
    lay = layouts_of(layout)
    ranks = layout.dp * layout.cp
    spans_nodes = bool(order_spans(lay, system.nccl_node_gpus, MEGATRON_ORDER, ("dp",))["dp"][1][0] > 1)
    tier = "scale_out" if spans_nodes else "scale_up"
    knobs, grad_bytes = job.knobs, gradient_bytes(job)
    grad_factor = float(knob_rules.grad_wire_factor(knobs, job.model, np.asarray([layout.tp]), grad_bytes)[0])
    out = {"scale_up": 0.0, "scale_out": 0.0}
    for op, size, count in step_items(base, layout)["dp"]:
        sent = _wire_bytes(op, size, ranks) * count
        if op in GRADIENT_OPS:
            out[tier] += sent * grad_factor * knob_rules.zeropp_factor(knobs, "qg", grad_bytes)
            continue
        if layout.zero < 3:
            out[tier] += sent
            continue
        # ZeRO-3 gathers twice per layer: forward (qw quantises it) and backward (hp keeps it on the node).
        out[tier] += sent / 2 * knob_rules.zeropp_factor(knobs, "qw", 2.0)
        if "hp" in knobs.zeropp and spans_nodes:
            local = min(ranks, system.nccl_node_gpus)
            out["scale_up"] += _wire_bytes(op, size, local) * count / 2
        else:
            out[tier] += sent / 2
    return out


def knob_effect(job: Job, system: System, layout: Layout, tiers: CommTiers | None = None) -> KnobEffect:
    """The job's knobs against the same job without them, on `layout`."""
    base = replace(job, knobs=knob_rules.Knobs())
    lay = layouts_of(layout)
    with_knobs, without = estimate_steps(job, system, lay, tiers), estimate_steps(base, system, lay, tiers)
    return KnobEffect(
        knobs=job.knobs.as_dict(), label=job.knobs.label(),
        baseline_step_time_s=float(without.step_time_s[0]), step_time_s=float(with_knobs.step_time_s[0]),
        saved_s=float(without.step_time_s[0] - with_knobs.step_time_s[0]),
        dp_comm_exposed_s_before=float(without.dp_comm_exposed_s[0]),
        dp_comm_exposed_s_after=float(with_knobs.dp_comm_exposed_s[0]),
        knob_compute_s=float(with_knobs.knob_compute_s[0]),
        memory_gib_added=float(with_knobs.memory_gib_per_gpu[0] - without.memory_gib_per_gpu[0]),
        bytes_per_gpu_before=dp_bytes_per_tier(base, system, layout),
        bytes_per_gpu_after=dp_bytes_per_tier(job, system, layout),
        optimisation=knob_rules.optimisation_note(job.knobs))
