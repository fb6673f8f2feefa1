"""A progress bar on stderr for sweeps that take more than a few seconds.

Shown only when stderr is a terminal and the run is not `--quiet`; it appears once the run has lasted
`DELAY_S`, so quick sweeps print nothing but their table.
"""

from __future__ import annotations

import sys
import time
from typing import Any

DELAY_S = 3.0


class ProgressView:
    """Counts completed steps (sizes or pairs) out of `total`."""

    def __init__(self, total: int, enabled: bool, label: str) -> None:
        self.total = total
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self._start = time.monotonic()
        self._done = 0
        self._bar: Any = None
        self._task: Any = None

    def advance(self, description: str = "") -> None:
        """One more step done; start the bar if the run has become long enough to want one."""
        self._done += 1
        if not self.enabled:
            return
        if self._bar is None and time.monotonic() - self._start >= DELAY_S:
            self._open()
        if self._bar is not None:
            self._bar.update(self._task, completed=self._done, description=description or self.label)

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task = self._bar.add_task(self.label, total=self.total, completed=self._done)
        self._bar.start()

    @property
    def shares_terminal(self) -> bool:
        """Whether the bar is up and stdout is the same terminal (lines must then go above the bar)."""
        return self._bar is not None and sys.stdout.isatty()

    def print_above(self, line: str) -> None:
        """Print one line above the bar, unwrapped, exactly as given."""
        self._bar.console.print(line, soft_wrap=True, highlight=False, markup=False, emoji=False)

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
