"""How far `check` measures, and what it judges against: the size where the expected System's bus bandwidth reaches
its plateau (from the model), the published health-check floors, and memory.

Clouds' health checks run all-reduce at 8-16 GiB because an 8-GPU NVSwitch node is far from its plateau at a few
hundred MiB; `check --full` measures that far too, bounded by the memory the GPUs have free. On CPU ranks (gloo),
which no GPU model describes, the sweep stays as short as it always was.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from linkscope.check.bandwidth import BandwidthContext
from linkscope.hardware.errors import UserError
from linkscope.hardware.floors import HealthFloor, HealthFloors, load_floors
from linkscope.hardware.system import System

PLATEAU_FRACTION = 0.95
"""The plateau starts at the smallest size whose predicted busbw is within 5% of the largest size's."""
NVSWITCH_MIN_PLATEAU_BYTES = 4 << 30
"""NVSwitch nodes are measured to at least 4 GiB, as the clouds' checks do (NVLS keeps climbing past 1 GiB)."""
QUICK_MAX_BYTES = 1 << 20
CPU_MAX_BYTES = 256 << 20
"""Gloo on CPU ranks: the sweep `check --full` always ran; larger sizes would only take longer."""
GPU_BYTES_PER_MESSAGE = 3
"""A rank holds about three buffers of the largest message (input, output, the correctness check)."""
_PROBE_SIZES = [1 << k for k in range(16, 37)]
"""64 KiB .. 64 GiB: where a plateau is looked for."""


@functools.lru_cache(maxsize=4)
def health_floors(path: str | None = None) -> HealthFloors:
    """The health-check floors (the published ones, or a user's file given with --floors), validated against the
    catalog once per process."""
    from linkscope.hardware.floors import FLOORS_FILE
    from linkscope.hardware.loader import load_db

    return load_floors(load_db(), Path(path) if path else FLOORS_FILE)


def plateau_bytes(expected: System, op: str, gpus: int) -> int | None:
    """The smallest power-of-two size at which `op` on `gpus` GPUs of `expected` is within 5% of its largest
    predicted busbw (at least 4 GiB inside an NVSwitch domain); None where the model cannot say."""
    from linkscope.model.comm.predict import predict_sizes

    if gpus < 2:
        return None
    try:
        preds = predict_sizes(expected, op, _PROBE_SIZES, gpus=gpus)
    except (UserError, ValueError):
        return None
    top = preds[-1].busbw
    size = next(p.bytes for p in preds if p.busbw >= PLATEAU_FRACTION * top)
    one_domain = gpus <= expected.node.scale_up.domain_size and gpus <= expected.node.gpus
    if expected.node.scale_up.kind == "nvswitch" and one_domain:
        size = max(size, NVSWITCH_MIN_PLATEAU_BYTES)
    return size


def floors_for(expected: System, ops: list[str], gpus_per_node: int, nodes: int,
               floors_file: str | None = None) -> dict[str, HealthFloor]:
    """The floors published for this System at this GPU and node count, per op."""
    floors = health_floors(floors_file)
    found = {op: floors.find(expected.id, op, gpus_per_node, nodes) for op in ops}
    return {op: floor for op, floor in found.items() if floor is not None}


def bandwidth_context(expected: System, ops: list[str], world: int, nodes: int, not_comparable: str = "",
                      rerun_hint: str = "run --full", floors_file: str | None = None) -> BandwidthContext:
    """Everything a bandwidth item is judged against besides the prediction."""
    plateaus = {op: p for op in ops if (p := plateau_bytes(expected, op, world)) is not None}
    per_node = max(1, world // max(1, nodes))
    return BandwidthContext(system_id=expected.id, plateau_bytes=plateaus,
                            floors=floors_for(expected, ops, per_node, nodes, floors_file),
                            not_comparable=not_comparable, rerun_hint=rerun_hint)


@dataclass(frozen=True)
class SweepPlan:
    """The largest size a `check` sweep measures, and why it stops there."""

    max_bytes: int
    reason: str


def _pow2_at_most(nbytes: float) -> int:
    size = 1
    while size * 2 <= nbytes:
        size *= 2
    return size


def full_sweep(expected: System, ops: tuple[str, ...], world: int, on_gpu: bool, gpu_memory_bytes: float | None,
               host_available_bytes: float | None, floors_file: str | None = None) -> SweepPlan:
    """`check --full`: up to the plateau of every op (and a floor's test size), bounded by memory; on CPU ranks
    the sweep it always was, bounded by host memory."""
    if not on_gpu:
        cap = CPU_MAX_BYTES
        if host_available_bytes:
            cap = min(cap, _pow2_at_most(host_available_bytes / (GPU_BYTES_PER_MESSAGE * max(1, world))))
        return SweepPlan(max(cap, 1 << 20), "CPU ranks: gloo, no GPU model to reach a plateau of")
    targets = [p for op in ops if (p := plateau_bytes(expected, op, world)) is not None]
    floors = floors_for(expected, list(ops), expected.node.gpus, 1, floors_file)
    targets += [f.size_bytes for f in floors.values()]
    want = max(targets, default=CPU_MAX_BYTES)
    reason = "the plateau and the health-check floors' size" if floors else "the plateau"
    if gpu_memory_bytes:
        cap = _pow2_at_most(gpu_memory_bytes / GPU_BYTES_PER_MESSAGE)
        if cap < want:
            return SweepPlan(cap, f"bounded by GPU memory ({gpu_memory_bytes / 2**30:.0f} GiB free)")
    return SweepPlan(want, reason)
