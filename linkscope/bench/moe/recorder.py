"""Rank 0's `bench moe` reports turned into printed lines and the stored run, as they arrive.

A `bench moe` run is one stored run of kind `moe`; what it measured lives in the run's `extra["moe"]`:
`routing` (the world x world token counts, distinct destination ranks and nodes per token) and `timings`
(the slowest rank's seconds per timed dispatch and combine, wrong rows per rank). The analysis beside the
prediction is added as `extra["moe_summary"]` once the run is over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from linkscope.bench import printer
from linkscope.bench.layout import RankInfo
from linkscope.bench.run_recorder import RunRecorder
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore


class MoeRecorder(RunRecorder):
    """A MoeSink: prints the device lines and keeps the store current."""

    def __init__(self, store: ResultStore, info: RunInfo, emit: Callable[[str], None], quiet: bool) -> None:
        super().__init__(store, info, emit, quiet)
        self.routing: dict[str, Any] = {}
        self.timings: dict[str, Any] = {}
        self.wrong: list[str] = []

    def _save(self) -> None:
        self.info.extra["moe"] = {"routing": self.routing, "timings": self.timings}
        self.store.update_run(self.info.run_id, extra=self.info.extra)

    def started(self, infos: list[RankInfo]) -> None:
        """Record the rank layout and print the device lines."""
        self.record_layout(infos)
        self.lines(printer.device_lines(infos))

    def moe_routed(self, routing: dict[str, Any]) -> None:
        """Every rank has routed its tokens."""
        self.routing = routing
        self._save()

    def moe_timed(self, timings: dict[str, Any]) -> None:
        """Dispatch and combine are timed."""
        self.timings = timings
        self.wrong = [f"{n} misrouted row(s) on rank {rank}" for rank, n in enumerate(timings["wrong_rows"]) if n]
        self._save()

    def attach(self, key: str, value: Any) -> None:
        """Keep the analysis (measured beside predicted) with the run."""
        self.info.extra[key] = value
        self.store.update_run(self.info.run_id, extra=self.info.extra)
