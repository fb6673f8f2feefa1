"""What a watchdog can see of a rank besides its progress counter: whether it runs at all, and whether it works.

A progress counter alone cannot tell a rank frozen inside a step (SIGSTOP, a stuck driver) from one still
computing a slow step on a loaded machine: both leave every counter level. Two more signs settle it without
racing the wall clock: a rank whose process is stopped, or whose heartbeat has not moved for the whole stall,
is the one to name; a rank that keeps using CPU is working, so a stall is not declared while one does (up to a
generous limit, so a rank spinning forever is still caught).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

BEAT_S = 0.25
"""How often a rank's heartbeat thread publishes."""
BUSY_WINDOW_S = 2.0
"""CPU use is judged over the last this many seconds, so work done before a rank hung does not count."""
BUSY_FRACTION = 0.05
"""A rank using at least this share of one core over the window is working, not waiting or hung (a rank waiting
in a gloo collective or asleep uses well under 1%)."""


@dataclass(frozen=True)
class Pulse:
    """One reading of a rank: CPU seconds used so far, a heartbeat count, and whether the OS has it stopped."""

    cpu_s: float
    beat: int = 0
    stopped: bool = False


def read_local_pulse(pid: int | None) -> Pulse | None:
    """A local process's pulse from /proc (state and CPU ticks); None where /proc cannot say."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = text[text.rfind(")") + 2:].split()
    try:
        ticks = int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None
    return Pulse(ticks / os.sysconf("SC_CLK_TCK"), 0, fields[0] in ("T", "t"))


@dataclass
class PulseHistory:
    """Readings of every rank over a stall: where it started, and the last few seconds."""

    start: list[Pulse] | None = None
    recent: deque[tuple[float, list[Pulse]]] = field(default_factory=deque)

    def moved(self) -> None:
        """Progress moved: a new stall (if any) starts from the next reading."""
        self.start = None
        self.recent.clear()

    def add(self, pulses: list[Pulse] | None) -> None:
        """Record a reading of every rank (ignored when some rank could not be read)."""
        if pulses is None:
            return
        now = time.monotonic()
        if self.start is None or len(self.start) != len(pulses):
            self.start = pulses
        self.recent.append((now, pulses))
        while len(self.recent) > 1 and now - self.recent[1][0] >= BUSY_WINDOW_S:
            self.recent.popleft()

    def frozen(self) -> list[int]:
        """Ranks stopped by the OS, or whose heartbeat has not moved since the stall began."""
        if self.start is None or not self.recent:
            return []
        now = self.recent[-1][1]
        beating = any(p.beat for p in now)
        return [r for r, (a, b) in enumerate(zip(self.start, now))
                if b.stopped or (beating and a.beat == b.beat)]

    def busy(self) -> list[int]:
        """Ranks that used at least `BUSY_FRACTION` of a core over the last `BUSY_WINDOW_S`."""
        if len(self.recent) < 2:
            return []
        (t0, first), (t1, last) = self.recent[0], self.recent[-1]
        span_s = t1 - t0
        if span_s < BUSY_WINDOW_S / 2:
            return []
        return [r for r, (a, b) in enumerate(zip(first, last)) if b.cpu_s - a.cpu_s >= BUSY_FRACTION * span_s]


def suspects(values: list[int], frozen: list[int]) -> list[int]:
    """The ranks a stall is blamed on: frozen ones first, else those whose counters are behind."""
    if frozen:
        return frozen
    lowest = min(values)
    return [r for r, v in enumerate(values) if v == lowest]


def keep_waiting(values: list[int], history: PulseHistory, stalled_s: float, limit_s: float) -> bool:
    """Whether a stall past the timeout is still ordinary work: nobody frozen and some suspect busy."""
    if stalled_s > limit_s or history.frozen():
        return False
    return bool(set(suspects(values, [])) & set(history.busy()))


class Heartbeat:
    """A daemon thread that publishes this process's (beat count, CPU seconds) every `BEAT_S`.

    It keeps beating while the main thread waits in a collective, and stops only when the whole process does."""

    def __init__(self, publish: Callable[[int, float], None]) -> None:
        self._publish = publish
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="linkscope-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        """Start beating."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating."""
        self._stop.set()
        self._thread.join(2.0)

    def _loop(self) -> None:
        beat = 0
        while not self._stop.wait(BEAT_S):
            beat += 1
            try:
                self._publish(beat, time.process_time())
            except (RuntimeError, OSError):  # a store going away at shutdown must not kill the rank
                return
