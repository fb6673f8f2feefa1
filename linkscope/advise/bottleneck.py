"""Where a training step's time goes, in the words people use: communication-, bubble-, memory-,
optimizer- or compute-bound."""

from __future__ import annotations

from collections.abc import Mapping

COMPUTE_BOUND_BELOW = 0.10
"""An overhead under 10% of the step is not worth naming: the step is compute-bound."""

_COMM = {"tp_comm_exposed_s": "TP", "cp_comm_exposed_s": "CP", "pp_comm_exposed_s": "PP", "dp_comm_exposed_s": "DP"}
_SHORT = {"communication-bound": "comm", "bubble-bound": "bubble", "memory-bound": "recompute",
          "optimizer-bound": "optimizer"}


def _worst(breakdown: Mapping[str, float], step_time_s: float) -> tuple[str, float, str]:
    """(kind, share of the step, largest communication part) of the biggest overhead."""
    comm = {name: breakdown.get(key, 0.0) for key, name in _COMM.items()}
    groups = {
        "communication-bound": sum(comm.values()),
        "bubble-bound": breakdown.get("bubble_s", 0.0),
        # Recomputation is the time paid because the activations do not fit: memory-bound.
        "memory-bound": breakdown.get("recompute_s", 0.0),
        "optimizer-bound": breakdown.get("optimizer_s", 0.0),
    }
    worst = max(groups, key=lambda k: groups[k])
    share = groups[worst] / step_time_s if step_time_s > 0 else 0.0
    kind = worst if share >= COMPUTE_BOUND_BELOW else "compute-bound"
    return kind, share, max(comm, key=lambda k: comm[k])


def bottleneck_label(breakdown: Mapping[str, float], step_time_s: float) -> str:
    """`communication-bound (23%, mostly TP)`, `memory-bound (recompute 25%)`, `bubble-bound (15%)`,
    `compute-bound`."""
    kind, share, part = _worst(breakdown, step_time_s)
    if kind == "compute-bound":
        return kind
    if kind == "communication-bound":
        return f"{kind} ({share:.0%}, mostly {part})"
    if kind == "memory-bound":
        return f"{kind} (recompute {share:.0%})"
    return f"{kind} ({share:.0%})"


def bottleneck_short(breakdown: Mapping[str, float], step_time_s: float) -> str:
    """The same verdict in a table cell: `comm 23% TP`, `recompute 25%`, `bubble 15%`, `compute`."""
    kind, share, part = _worst(breakdown, step_time_s)
    if kind == "compute-bound":
        return "compute"
    suffix = f" {part}" if kind == "communication-bound" else ""
    return f"{_SHORT[kind]} {share:.0%}{suffix}"
