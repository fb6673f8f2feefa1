"""Rank 0's training reports turned into printed lines and the stored run, as they arrive.

A training run is one stored run of kind `train` holding one or more points (a configuration: a sweep
setting or a rank count). Each point's steps go into the run's `extra["train"]["points"]` as they are measured,
so a run that dies keeps every step measured so far.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from linkscope.bench import printer
from linkscope.bench.layout import RankInfo
from linkscope.bench.run_recorder import RunRecorder
from linkscope.results.records import RunInfo, RunStatus
from linkscope.results.store import ResultStore


@dataclass
class TrainPoint:
    """One measured configuration."""

    label: str
    ranks: int
    settings: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    per_rank: list[dict[str, float]] = field(default_factory=list)
    trace_paths: list[str] = field(default_factory=list)
    trace_step_wall_s: float | None = None
    status: str = "running"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, as stored."""
        return dict(self.__dict__)


class TrainRecorder(RunRecorder):
    """A Sink for training reports: prints step lines and keeps the store current."""

    def __init__(self, store: ResultStore, info: RunInfo, emit: Callable[[str], None], quiet: bool) -> None:
        super().__init__(store, info, emit, quiet)
        self.points: list[TrainPoint] = []

    def begin_point(self, label: str, ranks: int, settings: dict[str, Any]) -> TrainPoint:
        """A new configuration is about to start."""
        point = TrainPoint(label, ranks, settings)
        self.points.append(point)
        self.done = False
        if label:
            self.emit(f"# {label}")
        return point

    @property
    def point(self) -> TrainPoint:
        """The configuration being measured."""
        return self.points[-1]

    def _save(self) -> None:
        self.info.extra["train"] = {"points": [p.as_dict() for p in self.points]}
        self.store.update_run(self.info.run_id, extra=self.info.extra)

    def started(self, infos: list[RankInfo]) -> None:
        """Record the rank layout (of the largest point) and print the device lines."""
        if len(infos) >= self.info.world_size or not self.info.hosts:
            self.record_layout(infos)
        self.lines(printer.device_lines(infos))

    def train_started(self, meta: dict[str, Any]) -> None:
        """The model is built on every rank."""
        self.point.meta = meta
        self._save()
        self.emit(f"# {meta['params'] / 1e6:.2f} M parameters, {meta['precision']}, "
                  f"{meta['tokens_per_step']} tokens per step")
        self.emit(f"# {'repeat':>6} {'step':>5} {'step_time_s':>12} {'loss':>9}")

    def train_step(self, repeat: int, step: int, step_time_s: float, loss: float) -> None:
        """One step done on every rank; `step` < 0 for warm-up steps."""
        self.point.steps.append({"repeat": repeat, "step": step, "step_time_s": step_time_s, "loss": loss})
        self._save()
        tag = "warm" if step < 0 else str(step + 1)
        self.emit(f"  {repeat + 1:>6} {tag:>5} {step_time_s:>12.4f} {loss:>9.4f}")

    def train_ranks(self, per_rank: list[dict[str, float]]) -> None:
        """Each rank's mean step time and peak memory."""
        self.point.per_rank = per_rank
        self._save()

    def train_traced(self, paths: list[str], step_wall_s: float) -> None:
        """The traced steps are written, one Kineto JSON per rank."""
        self.point.trace_paths = paths
        self.point.trace_step_wall_s = step_wall_s
        self._save()

    def end_point(self, status: str) -> None:
        """The point's final status (complete or incomplete)."""
        self.point.status = status
        self._save()

    def attach(self, key: str, value: Any) -> None:
        """Keep an analysis result (summary, prediction, trace analysis) with the run."""
        self.info.extra[key] = value
        self.store.update_run(self.info.run_id, extra=self.info.extra)

    def close(self, status: RunStatus, error: str | None) -> None:
        """Store the final status."""
        if status != "complete" and self.points and self.points[-1].status == "running":
            # Ended from outside the point (rank 0's guard under torchrun): the point's steps so far stay.
            self.end_point("incomplete")
        self.finish_run(status, error)
