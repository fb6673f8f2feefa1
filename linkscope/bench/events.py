"""What rank 0 reports while it measures, and where those reports go.

Rank 0 calls a Sink as each step completes. Under torchrun the sink is the Recorder itself (rank 0
prints and stores); under linkscope's own launcher it is a QueueSink that forwards each call to the
parent process, which owns the Recorder, the store and the run's final status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from linkscope.bench.layout import RankInfo
from linkscope.results.records import CollectiveRow, PairRow


@dataclass
class SizeResult:
    """One size of one op in one repeat: both placements, and which ranks got wrong results."""

    repeat: int
    op: str
    size_index: int
    rows: list[CollectiveRow]
    wrong_ranks: dict[str, dict[int, int]] = field(default_factory=dict)
    """placement -> {rank: wrong elements}, only where a check found errors."""


class Sink(Protocol):
    """Receives rank 0's reports, in order."""

    def started(self, infos: list[RankInfo]) -> None:
        """Every rank has joined; here is who runs where."""

    def op_started(self, op: str, repeat: int) -> None:
        """A collective's sweep begins."""

    def size_done(self, result: SizeResult) -> None:
        """One size is measured and checked."""

    def op_finished(self, op: str, repeat: int) -> None:
        """A collective's sweep is over."""

    def pair_done(self, row: PairRow) -> None:
        """One pair of the p2p matrix is measured."""

    def finished(self) -> None:
        """The whole job is over on every rank."""


class TrainSink(Protocol):
    """Receives rank 0's reports of a training run, in order."""

    def started(self, infos: list[RankInfo]) -> None:
        """Every rank has joined; here is who runs where."""

    def train_started(self, meta: dict[str, Any]) -> None:
        """The model is built on every rank."""

    def train_step(self, repeat: int, step: int, step_time_s: float, loss: float) -> None:
        """One step done on every rank; `step` < 0 for warm-up steps."""

    def train_ranks(self, per_rank: list[dict[str, float]]) -> None:
        """Each rank's mean step time and peak memory."""

    def train_traced(self, paths: list[str], step_wall_s: float) -> None:
        """The traced steps are written, one Kineto JSON per rank."""

    def finished(self) -> None:
        """The whole job is over on every rank."""


class MoeSink(Protocol):
    """Receives rank 0's reports of a `bench moe` run, in order."""

    def started(self, infos: list[RankInfo]) -> None:
        """Every rank has joined; here is who runs where."""

    def moe_routed(self, routing: dict[str, Any]) -> None:
        """Every rank has routed its tokens and knows what it receives."""

    def moe_timed(self, timings: dict[str, Any]) -> None:
        """Dispatch and combine are timed: the slowest rank's seconds per iteration, and wrong rows per rank."""

    def finished(self) -> None:
        """The whole job is over on every rank."""


class KvSink(Protocol):
    """Receives rank 0's reports of a `bench kv` run, in order."""

    def started(self, infos: list[RankInfo]) -> None:
        """Every rank has joined; here is who runs where."""

    def kv_point(self, point: dict[str, Any]) -> None:
        """One block size and in-flight count is timed: geometry, the slowest rank's seconds, wrong pages."""

    def finished(self) -> None:
        """The whole job is over on every rank."""


class NullSink:
    """For ranks other than 0: reports go nowhere."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


class QueueSink:
    """Forwards every report to the parent process as `("event", method, args)`."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        def forward(*args: Any) -> None:
            self._queue.put(("event", name, args))

        return forward
