"""MLPerf Training result logs (`:::MLLOG {json}` lines): the steady time of one training step.

A result file logs `block_start` / `block_stop` around each stretch of training between evaluations, with the
samples seen so far (`samples_count`) and the global batch (`global_batch_size`). One step's time is a block's
duration over the steps in it. The first block also holds warm-up (compilation, allocator growth, the first
evaluation's setup), so the steady time is the median of the later blocks; a run with one block keeps it.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from linkscope.hardware.errors import UserError

PREFIX = ":::MLLOG"


@dataclass(frozen=True)
class MllogRun:
    """What one result file says about the steady step."""

    benchmark: str
    global_batch: int
    step_time_s: float
    blocks: int
    """Blocks measured (the first is left out whenever there are others)."""
    lora_rank: int | None = None


def _events(text: str) -> list[dict[str, object]]:
    events = []
    for line in text.splitlines():
        start = line.find(PREFIX)
        if start < 0:
            continue
        try:
            event = json.loads(line[start + len(PREFIX):])
        except json.JSONDecodeError:
            continue  # a line cut by a crash or interleaved with other output
        if isinstance(event, dict):
            events.append(event)
    return events


def _samples(event: dict[str, object]) -> int | None:
    meta = event.get("metadata")
    value = meta.get("samples_count") if isinstance(meta, dict) else None
    return value if isinstance(value, int) else None


def _step_s(stop: tuple[float, int], start_ms: float, samples: int, batch: int) -> float:
    """Seconds per step of a block from `start_ms` to stop[0] that took the count from stop[1] to `samples`."""
    return (stop[0] - start_ms) / 1000.0 / ((samples - stop[1]) / batch)


def parse_mllog(text: str, name: str = "result") -> MllogRun:
    """The steady step time of one MLPerf result file; UserError naming `name` if it has no timed block."""
    events = _events(text)
    first = {str(e.get("key")): e.get("value") for e in reversed(events)}
    batch = first.get("global_batch_size")
    if not isinstance(batch, int) or batch < 1:
        raise UserError(f"{name}: no global_batch_size in the MLLOG lines")
    per_step: list[float] = []
    opened: tuple[float, int] | None = None
    closed: tuple[float, int] | None = None
    opened_at = 0.0
    """(stop time, start samples) of a block whose stop logged its start count: mlperf_common's callbacks
    do, and the `eval_start` that follows carries the count the block reached."""
    for event in events:
        key, when, samples = event.get("key"), event.get("time_ms"), _samples(event)
        if not isinstance(when, (int, float)) or samples is None:
            continue
        if closed is not None and samples > closed[1]:
            per_step.append(_step_s(closed, opened_at, samples, batch))
            closed = None
        if key == "block_start":
            opened, closed = (when, samples), None
        elif key == "block_stop" and opened is not None:
            opened_at = opened[0]
            if samples > opened[1]:
                per_step.append(_step_s((when, opened[1]), opened_at, samples, batch))
            else:
                closed = (when, opened[1])
            opened = None
    if not per_step:
        raise UserError(f"{name}: no block_start/block_stop pair with samples_count")
    steady = per_step[1:] or per_step
    rank = first.get("lora_rank")
    return MllogRun(benchmark=str(first.get("submission_benchmark", "")), global_batch=batch,
                    step_time_s=statistics.median(steady), blocks=len(steady),
                    lora_rank=rank if isinstance(rank, int) else None)
