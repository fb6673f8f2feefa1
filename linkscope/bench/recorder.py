"""Rank 0's reports turned into printed lines and stored rows, as they arrive.

The Recorder runs where the store is owned: in the parent process under linkscope's own launcher, in
rank 0 under torchrun. Each size is committed to the store as soon as its last repeat is measured, so
a run that dies keeps every size measured so far; `close()` stores what partial repeats there are and
sets the final status.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from linkscope.bench import printer
from linkscope.bench.events import SizeResult
from linkscope.bench.layout import RankInfo
from linkscope.bench.progress import ProgressView
from linkscope.bench.repeats import aggregate
from linkscope.bench.run_recorder import RunRecorder
from linkscope.results.records import CollectiveRow, PairRow, RunInfo, RunStatus
from linkscope.results.store import ResultStore
from linkscope.results.nccltests.table import format_table_row

EXIT_OK = 0
EXIT_WRONG = 1
EXIT_USER_ERROR = 2
EXIT_FAULT = 3


@dataclass
class RunResult:
    """How a run ended and what it measured; what `run_bench` and `run_p2p` return."""

    run_id: str
    db_path: str
    """Where the run is stored, as messages name it (a PostgreSQL URL without its password)."""
    status: str
    """`complete`, `incomplete` or `failed`, as stored."""
    exit_code: int
    """0 ok, 1 wrong results, 2 user error, 3 fault, timeout or interrupt."""
    rows: list[CollectiveRow] = field(default_factory=list)
    pair_rows: list[PairRow] = field(default_factory=list)
    error: str | None = None
    info: RunInfo | None = None


Key = tuple[str, int, str]


class Recorder(RunRecorder):
    """Receives rank 0's reports (a Sink), prints, stores, and keeps the rows for export."""

    def __init__(self, store: ResultStore, info: RunInfo, cfg: Any, emit: Callable[[str], None], total: int,
                 to_stdout: bool = False) -> None:
        """`to_stdout`: `emit` writes to the terminal's stdout, so lines may have to go above a progress bar."""
        super().__init__(store, info, emit, cfg.run.quiet)
        self.cfg = cfg
        self._to_stdout = to_stdout
        self.progress = ProgressView(total, not cfg.run.quiet, info.kind)
        self.samples: dict[Key, list[CollectiveRow]] = {}
        self.stored: list[CollectiveRow] = []
        self.pairs: list[PairRow] = []
        self.wrong: list[str] = []
        self._stored_keys: set[Key] = set()
        self._op_rows: list[CollectiveRow] = []

    def emit(self, line: str) -> None:
        """Print one line (nothing with --quiet); above the progress bar when one is showing."""
        if self.quiet:
            return
        if self._to_stdout and self.progress.shares_terminal:
            self.progress.print_above(line)
        else:
            self._emit(line)

    def started(self, infos: list[RankInfo]) -> None:
        """Record the rank layout and print the run header."""
        self.record_layout(infos)
        if self.info.kind == "bench":
            self.lines(printer.run_header(self.cfg, self.info.versions, self.info.backend))
        self.lines(printer.device_lines(infos))

    def op_started(self, op: str, repeat: int) -> None:
        """Print the op's marker and column headings."""
        self._op_rows = []
        self.lines(printer.op_start_lines(op, repeat, self.cfg.repeat))

    def size_done(self, result: SizeResult) -> None:
        """Print the row; store the size once its last repeat is in."""
        out_of_place, in_place = result.rows
        self._op_rows += result.rows
        self.emit(format_table_row(out_of_place, in_place).rstrip("\n"))
        for placement, by_rank in result.wrong_ranks.items():
            size = out_of_place.size_bytes
            self.lines(printer.wrong_lines(result.op, size, placement, by_rank))
            self.wrong.append(f"{result.op} {size} B {placement.replace('_', '-')} on rank(s) "
                              + ", ".join(str(r) for r in sorted(by_rank)))
        for row in result.rows:
            self.samples.setdefault((row.op, result.size_index, row.placement), []).append(row)
        if result.repeat == self.cfg.repeat - 1:
            self._store_size(result.op, result.size_index)
        self.progress.advance(f"{result.op} {out_of_place.size_bytes} B")

    def _store_size(self, op: str, size_index: int) -> None:
        keys = [(op, size_index, placement) for placement in ("out_of_place", "in_place")]
        rows = [aggregate(self.samples[k]) for k in keys if k in self.samples and k not in self._stored_keys]
        if rows:
            self.store.add_rows(self.info.run_id, rows)
            self.stored += rows
            self._stored_keys.update(keys)

    def op_finished(self, op: str, repeat: int) -> None:
        """Print the op's footer; after the last repeat of several, the table of means."""
        self.lines(printer.op_end_lines(op, self._op_rows))
        if self.cfg.repeat > 1 and repeat == self.cfg.repeat - 1:
            mine = [r for r in self.stored if r.op == op]
            self.lines(printer.summary_lines(op, mine, self.cfg.repeat))

    def pair_done(self, row: PairRow) -> None:
        """Store one pair of the p2p matrix."""
        self.store.add_pair_rows(self.info.run_id, [row])
        self.pairs.append(row)
        self.progress.advance(f"pair {row.src}-{row.dst}")

    def flush_partial(self) -> None:
        """Store every size measured in fewer repeats than asked (a run that ended early)."""
        indices = sorted({(op, idx) for op, idx, _ in self.samples})
        for op, idx in indices:
            self._store_size(op, idx)

    def close(self, status: RunStatus, error: str | None) -> None:
        """Store what is left, and the final status."""
        self.progress.close()
        self.flush_partial()
        self.finish_run(status, error)


def final_status(outcome_status: str, wrong: list[str], message: str) -> tuple[RunStatus, int, str | None]:
    """(stored status, exit code, error text) from how the launch ended and what the checks found."""
    if outcome_status == "user_error":
        return "failed", EXIT_USER_ERROR, message
    if outcome_status in ("fault", "interrupted"):
        return "incomplete", EXIT_FAULT, message
    if wrong:
        return "failed", EXIT_WRONG, "wrong results: " + "; ".join(wrong)
    return "complete", EXIT_OK, None
