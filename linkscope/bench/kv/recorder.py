"""Rank 0's `bench kv` reports turned into the stored run, point by point.

A `bench kv` run is one stored run of kind `kv`; what it measured lives in the run's `extra["kv"]["points"]`: per
block size and in-flight count the geometry per pair (messages, page bytes, bytes) and the slowest rank's seconds per
timed transfer, with wrong pages per rank. Each point is stored as soon as it is timed, so a run that dies keeps
every point before it. The analysis beside the model is added as `extra["kv_summary"]` once the run is over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linkscope.bench import printer
from linkscope.bench.layout import RankInfo
from linkscope.bench.run_recorder import RunRecorder
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore


class KvRecorder(RunRecorder):
    """A KvSink: prints the device lines and a line per point, and keeps the store current."""

    def __init__(self, store: ResultStore, info: RunInfo, emit: Callable[[str], None], quiet: bool) -> None:
        super().__init__(store, info, emit, quiet)
        self.points: list[dict[str, Any]] = []
        self.wrong: list[str] = []

    def started(self, infos: list[RankInfo]) -> None:
        """Record the rank layout and print the device lines."""
        self.record_layout(infos)
        self.lines(printer.device_lines(infos))

    def kv_point(self, point: dict[str, Any]) -> None:
        """One point is timed: keep it, store it, say so."""
        self.points.append(point)
        self.wrong += [f"{n} wrong page(s) on rank {rank} at block {point['block_tokens']}"
                       for rank, n in enumerate(point["wrong_pages"]) if n]
        self.info.extra["kv"] = {"points": self.points}
        self.store.update_run(self.info.run_id, extra=self.info.extra)
        self.emit(f"# timed block {point['block_tokens']} x {point['in_flight']} in flight")

    def attach(self, key: str, value: Any) -> None:
        """Keep the analysis (measured beside the model) with the run."""
        self.info.extra[key] = value
        self.store.update_run(self.info.run_id, extra=self.info.extra)
