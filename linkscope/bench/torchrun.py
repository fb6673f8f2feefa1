"""Running under torchrun: progress through torchrun's store, and rank 0's guard.

Under torchrun there is no parent of linkscope's own, so rank 0 owns the store. Each rank publishes its
progress counter in the job's c10d store; a guard thread in rank 0 ends the run when rank 0 has made no
progress for `timeout_s` (naming the ranks that are behind) or when SIGTERM/SIGINT arrives. A Python
signal handler would only run once the main thread leaves the collective it may be stuck in, so the
signals reach the guard through the interpreter's wakeup file descriptor instead.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from linkscope.bench.recorder import EXIT_FAULT
from linkscope.bench.run_recorder import RunRecorder
from linkscope.results.store import ResultStore

PROGRESS_KEY = "linkscope/progress/{rank}"
SIGNALS = {signal.SIGTERM, signal.SIGINT}


def _default_store() -> Any:
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        return _get_default_store()
    except (ImportError, RuntimeError, ValueError):
        return None


def store_publisher(rank: int) -> Callable[[int], None]:
    """A progress callback that writes this rank's counter into the job's store."""
    key = PROGRESS_KEY.format(rank=rank)

    def publish(value: int) -> None:
        store = _default_store()
        if store is not None:
            store.set(key, str(value))

    return publish


def read_progress(world: int) -> list[int] | None:
    """Every rank's published counter (0 where none yet); None when the store cannot be read."""
    store = _default_store()
    if store is None:
        return None
    try:
        keys = [PROGRESS_KEY.format(rank=r) for r in range(world)]
        return [int(store.get(k)) if store.check([k]) else 0 for k in keys]
    except RuntimeError:
        return None


class SignalPipe:
    """SIGTERM/SIGINT as bytes on a pipe the guard thread can wait on (install from the main thread)."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        # A Python-level handler makes the interpreter catch the signal (instead of dying of it) and
        # write its number to the wakeup fd; the guard does the rest.
        self._previous = {sig: signal.signal(sig, lambda signum, frame: None) for sig in SIGNALS}

    def wait(self, timeout_s: float) -> int | None:
        """The next signal number, or None after `timeout_s`."""
        ready, _, _ = select.select([self.read_fd], [], [], timeout_s)
        if not ready:
            return None
        data = os.read(self.read_fd, 1)
        return data[0] if data else None

    def close(self) -> None:
        """Restore the handlers and the wakeup fd (main thread)."""
        signal.set_wakeup_fd(self._previous_fd)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        os.close(self._write_fd)
        os.close(self.read_fd)


class RankZeroGuard:
    """Rank 0's watchdog under torchrun: ends a stalled or signalled run with the store updated."""

    def __init__(self, recorder: RunRecorder, progress: Any, world: int, timeout_s: float,
                 describe: Callable[[list[int] | None, int], str]) -> None:
        self.recorder = recorder
        self.progress = progress
        self.world = world
        self.timeout_s = timeout_s
        self.describe = describe
        self._stop = threading.Event()
        self._signals: SignalPipe | None = None
        self._thread = threading.Thread(target=self._loop, name="linkscope-guard", daemon=True)
        self._stderr_fd = 2

    def start(self) -> None:
        """Start watching (from the main thread, which owns signal handling)."""
        self._signals = SignalPipe()
        # A copy of stderr as it is now: the abort's message must reach the user even while fd 2 is caught
        # (bench train catches it around the profiler's start and stop to drop kineto's markers).
        self._stderr_fd = os.dup(2)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the run ended normally or through an exception in the main thread)."""
        self._stop.set()
        self._thread.join(5.0)
        if self._signals is not None:
            self._signals.close()
        if self._stderr_fd != 2:
            os.close(self._stderr_fd)
            self._stderr_fd = 2

    def _loop(self) -> None:
        assert self._signals is not None
        last_value, last_move = self.progress.value, time.monotonic()
        while not self._stop.is_set():
            signum = self._signals.wait(0.5)
            if signum in SIGNALS:
                name = signal.Signals(signum).name
                self._abort(f"interrupted by {name} " + self.describe(None, self.progress.value))
            if self.progress.value != last_value:
                last_value, last_move = self.progress.value, time.monotonic()
            elif time.monotonic() - last_move > self.timeout_s:
                self._abort(self.describe(read_progress(self.world), self.progress.value))

    def _abort(self, message: str) -> None:
        # The main thread may be stuck in a collective: write through a connection of this thread's own.
        self.recorder.store = ResultStore(self.recorder.store.location)
        self.recorder.close("incomplete", message)
        sys.stderr.flush()
        text = (f"error: {message}\nerror: partial results stored as run {self.recorder.info.run_id} "
                f"in {self.recorder.store.where} (status incomplete)\n")
        with contextlib.suppress(OSError):
            os.write(self._stderr_fd, text.encode())
        os._exit(EXIT_FAULT)
