"""What every recorder of a run shares: the run's row in the store from start to final status, the rank layout,
printed lines, and reports forwarded by name.

`bench.recorder.Recorder` (collective sweeps and pairs) and `bench.train.recorder.TrainRecorder` (training steps)
add what they measure.
"""

from __future__ import annotations

from collections.abc import Callable

from linkscope.bench.layout import RankInfo, distinct_hosts, node_count, rank_groups
from linkscope.results.records import RunInfo, RunStatus
from linkscope.results.store import ResultStore, utc_now


class RunRecorder:
    """Owns one stored run: `begin` creates it (status running), `finish_run` sets its final status."""

    def __init__(self, store: ResultStore, info: RunInfo, emit: Callable[[str], None], quiet: bool) -> None:
        self.store = store
        self.info = info
        self._emit = emit
        self.quiet = quiet
        self.done = False

    def begin(self) -> str:
        """Create the run in the store (status running) and return its id."""
        self.info.run_id = self.store.create_run(self.info)
        return self.info.run_id

    def emit(self, line: str) -> None:
        """Print one line unless quiet."""
        if not self.quiet:
            self._emit(line)

    def lines(self, lines: list[str]) -> None:
        """Print several lines (nothing when quiet)."""
        for line in lines:
            self.emit(line)

    def record_layout(self, infos: list[RankInfo]) -> None:
        """Store which host each rank runs on, the world size, node count and rank groups."""
        self.info.hosts = distinct_hosts(infos)
        self.info.world_size = len(infos)
        self.info.nodes = node_count(infos)
        self.info.groups = rank_groups(infos)
        self.store.update_run(self.info.run_id, hosts=self.info.hosts, world_size=self.info.world_size,
                              nodes=self.info.nodes, groups=self.info.groups)

    def finished(self) -> None:
        """Every rank has finished the job."""
        self.done = True

    def dispatch(self, method: str, args: tuple) -> None:
        """Call a Sink method by name (reports forwarded over the launcher's queue)."""
        getattr(self, method)(*args)

    def finish_run(self, status: RunStatus, error: str | None) -> None:
        """Store the run's final status and when it ended."""
        self.info.status = status
        self.info.error = error
        self.info.ended_at = utc_now()
        self.store.finish_run(self.info.run_id, status, error)

    def close(self, status: RunStatus, error: str | None) -> None:
        """Store what is left, and the final status."""
        self.finish_run(status, error)
