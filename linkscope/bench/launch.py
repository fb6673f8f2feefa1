"""Starting local ranks outside torchrun, and watching them.

The parent process owns the run: it spawns one process per rank (multiprocessing `spawn`, file
rendezvous in a fresh temporary directory), receives rank 0's reports over a queue as each size
completes, and watches every rank. When a rank dies, does not finish start-up within
`startup_limit_s`, stops making progress for `timeout_s` (counted once every rank is ready), or the
user presses Ctrl-C, it stops the other ranks and says which rank and where; whatever rank 0 had
reported by then has already been handed to the parent (and stored).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from linkscope.bench.liveness import PulseHistory, keep_waiting, read_local_pulse, suspects
from linkscope.hardware.errors import UserError

POLL_S = 0.1
EXIT_GRACE_S = 1.5
"""After a rank dies, how long to keep listening for the others' error reports before deciding."""
PG_TIMEOUT_MARGIN_S = 60.0
"""The process-group timeout exceeds the watchdog's, so a hang is reported by the watchdog, by rank."""
STARTUP_MIN_S = 120.0
"""Start-up (importing torch, joining the process group) can take tens of seconds when several runs
start at once; it is not measured against `--timeout` but against at least this."""


STAGE_SPAWNED, STAGE_IMPORTED = 0, 1
"""Per-rank start-up stage, so a rank that never gets ready is named with where it got stuck."""


def startup_limit_s(timeout_s: float) -> float:
    """How long every rank gets to become ready (its progress counter leaves 0)."""
    return max(timeout_s, STARTUP_MIN_S)


@dataclass
class Outcome:
    """How a launch ended."""

    status: str
    """`complete`, `fault`, `interrupted` or `user_error`."""
    message: str = ""
    ranks: list[int] = field(default_factory=list)
    """The ranks the failure is attributed to."""


@dataclass
class _RankError:
    rank: int
    text: str
    user: bool


def _worker_main(rank: int, world: int, init_method: str, job: Any, q: Any, progress: Any, timeout_s: float,
                 parent_pid: int, stage: Any) -> None:
    # The parent handles Ctrl-C and stops the ranks itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from linkscope.bench.orphan import die_with_parent

    # Before importing torch: a launcher killed during start-up must not leave ranks behind.
    die_with_parent(parent_pid)
    from linkscope.bench.comm import init_rank
    from linkscope.bench.events import NullSink, QueueSink
    from linkscope.bench.jobs import run_job
    from linkscope.bench.layout import RankEnv

    env = RankEnv(rank=rank, world=world, local_rank=rank, local_world=world, node_rank=0)
    stage[rank] = STAGE_IMPORTED  # torch is in; what is left of start-up is joining the group

    def publish(value: int) -> None:
        progress[rank] = value

    try:
        cfg = job.config
        # Joining the group may wait for ranks still starting, so it gets the start-up limit.
        ctx = init_rank(env, cfg.run.backend, init_method, startup_limit_s(timeout_s) + PG_TIMEOUT_MARGIN_S, publish,
                        getattr(cfg, "cudagraph", 0))
        run_job(job, ctx, QueueSink(q) if rank == 0 else NullSink())
        ctx.close()
        if job.kind == "train":
            _exit_cleanly(q)
    except UserError as exc:
        # The message crosses to the parent as text: name the option as its long flag (--root, --tp).
        q.put(("rank_error", rank, exc.for_flags(), True))
        sys.exit(2)
    except BaseException as exc:  # every failure must reach the parent, named
        q.put(("rank_error", rank, f"{type(exc).__name__}: {exc}".strip(), False))
        sys.exit(1)


def _exit_cleanly(q: Any) -> None:
    """Leave without the interpreter's teardown once every report is flushed.

    After profiling with gloo, C++ destructors at exit sometimes meet a thread still joinable and abort the
    process ("terminate called without an active exception") after the work has succeeded; the parent would
    read that as a dead rank."""
    q.close()
    q.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class _Watch:
    """Parent-side state: processes, reports, progress counters and when they last moved."""

    def __init__(self, procs: list[Any], q: Any, progress: Any, handler: Callable[[str, tuple], None],
                 stage: Any = None) -> None:
        self.procs = procs
        self.stage = stage
        self.q = q
        self.progress = progress
        self.handler = handler
        self.errors: list[_RankError] = []
        self.last_values = list(progress)
        self.started = time.monotonic()
        self.last_move = self.started
        self.ready = False
        self.history = PulseHistory()

    def pump(self, wait_s: float) -> None:
        """Handle every queued report, waiting up to `wait_s` for the first."""
        block = wait_s > 0
        while True:
            try:
                msg = self.q.get(timeout=wait_s) if block else self.q.get_nowait()
            except (queue_mod.Empty, EOFError, OSError):
                return
            block = False
            if msg[0] == "event":
                self.handler(msg[1], msg[2])
            elif msg[0] == "rank_error":
                self.errors.append(_RankError(msg[1], msg[2], msg[3]))

    def not_ready(self) -> list[int]:
        """Ranks still starting up (counter 0: imports and process-group init not done yet)."""
        return [r for r, v in enumerate(self.progress) if v == 0]

    def starting_for(self) -> float:
        """Seconds since launch while some rank is still starting; 0 once all are ready.

        The stall clock starts when the last rank becomes ready, so slow start-up never counts
        against `--timeout`."""
        if self.ready:
            return 0.0
        if self.not_ready():
            return time.monotonic() - self.started
        self.ready = True
        self.last_values = list(self.progress)
        self.last_move = time.monotonic()
        return 0.0

    def stalled_for(self) -> float:
        """Seconds since any rank's progress counter last moved (0 while starting up)."""
        if not self.ready:
            return 0.0
        values = list(self.progress)
        if values != self.last_values:
            self.last_values = values
            self.last_move = time.monotonic()
            self.history.moved()
        pulses = [read_local_pulse(getattr(p, "pid", None)) for p in self.procs]
        readable = [p for p in pulses if p is not None]
        self.history.add(readable if len(readable) == len(pulses) else None)
        return time.monotonic() - self.last_move

    def frozen(self) -> list[int]:
        """Ranks whose processes are stopped (SIGSTOP), whatever their counters say."""
        return self.history.frozen()


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _fault_from_exits(watch: _Watch, where: Callable[[int], str]) -> Outcome:
    """Name the rank(s) behind a failure once some rank has exited non-zero."""
    user = [e for e in watch.errors if e.user]
    if user:
        return Outcome("user_error", user[0].text, [user[0].rank])
    reported = {e.rank for e in watch.errors}
    silent = [r for r, p in enumerate(watch.procs) if p.exitcode not in (None, 0) and r not in reported]
    if silent:
        parts = [f"rank {r} {_exit_text(watch.procs[r].exitcode)} {where(watch.progress[r])}" for r in silent]
        return Outcome("fault", "; ".join(parts), silent)
    first = watch.errors[0] if watch.errors else None
    if first is None:
        return Outcome("fault", "a rank exited without a report", [])
    return Outcome("fault", f"rank {first.rank} failed {where(watch.progress[first.rank])}: {first.text}", [first.rank])


def stall_message(values: list[int], timeout_s: float, where: Callable[[int], str],
                  frozen: list[int] | None = None) -> tuple[str, list[int]]:
    """Name the ranks to blame after a stall of `timeout_s`: frozen ones (stopped, no heartbeat), else those
    whose progress counters are behind the others'."""
    laggards = suspects(values, frozen or [])
    lowest = min(values[r] for r in laggards)
    if len(laggards) == len(values):
        return f"no rank made progress for {timeout_s:g} s {where(lowest)}", laggards
    names = ", ".join(str(r) for r in laggards)
    noun = "rank" if len(laggards) == 1 else "ranks"
    return (f"{noun} {names} stopped making progress for {timeout_s:g} s {where(lowest)}; "
            "the other ranks waited for it"), laggards


def behind_message(values: list[int], where: Callable[[int], str]) -> str:
    """After a failed collective: which ranks were behind the rest, and where they were last seen."""
    lowest = min(values)
    laggards = [r for r, v in enumerate(values) if v == lowest]
    if len(laggards) == len(values):
        return ""
    noun = "rank" if len(laggards) == 1 else "ranks"
    return f"{noun} {', '.join(str(r) for r in laggards)} last seen {where(lowest)}"


def _fault_from_stall(watch: _Watch, timeout_s: float, where: Callable[[int], str]) -> Outcome:
    message, ranks = stall_message(list(watch.progress), timeout_s, where, watch.frozen())
    return Outcome("fault", message, ranks)


def _fault_from_startup(watch: _Watch, limit_s: float) -> Outcome:
    """Name the ranks not ready after `limit_s`: those still importing are the cause, the others wait for them."""
    late = watch.not_ready()
    importing = [r for r in late if watch.stage is not None and watch.stage[r] == STAGE_SPAWNED]
    culprits, doing = (importing, "importing torch") if importing else (late, "joining the process group")
    if watch.stage is None:
        doing = "importing torch, joining the process group"
    noun = "rank" if len(culprits) == 1 else "ranks"
    return Outcome("fault", f"{noun} {', '.join(map(str, culprits))} did not finish start-up ({doing}) "
                   f"within {limit_s:g} s", culprits)


def _monitor(watch: _Watch, timeout_s: float, where: Callable[[int], str]) -> Outcome:
    while True:
        watch.pump(POLL_S)
        codes = [p.exitcode for p in watch.procs]
        if any(c not in (None, 0) for c in codes):
            deadline = time.monotonic() + EXIT_GRACE_S
            while time.monotonic() < deadline and any(p.exitcode is None for p in watch.procs):
                watch.pump(POLL_S)
            watch.pump(0)
            return _fault_from_exits(watch, where)
        if all(c == 0 for c in codes):
            watch.pump(0)
            return Outcome("complete")
        limit_s = startup_limit_s(timeout_s)
        if watch.starting_for() > limit_s:
            return _fault_from_startup(watch, limit_s)
        stalled_s = watch.stalled_for()
        # A stall past the timeout is only a fault once no suspect is still working (or after the start-up limit).
        if stalled_s > timeout_s and not keep_waiting(list(watch.progress), watch.history, stalled_s, limit_s):
            return _fault_from_stall(watch, timeout_s, where)


def _stop(procs: list[Any]) -> None:
    procs = [p for p in procs if p.pid is not None]  # started ones only
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 3.0
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)


class _Interrupted(Exception):
    pass


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM to the parent ends the run like Ctrl-C: ranks stopped, run marked incomplete."""

    def raise_interrupt(signum: int, frame: Any) -> None:
        raise _Interrupted()

    try:
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _quiet_resource_tracker() -> None:
    """multiprocessing's resource tracker (started with the first queue) inherits these warning options.

    When the launcher is SIGKILLed the tracker frees the queue's semaphores itself, as it should, but also prints
    a "leaked semaphore objects" warning about that cleanup: noise after a kill the run already records."""
    option = "ignore:resource_tracker:UserWarning"
    if option not in sys.warnoptions:
        sys.warnoptions.append(option)


def launch_local(
    job: Any,
    nproc: int,
    timeout_s: float,
    handler: Callable[[str, tuple], None],
    where: Callable[[int], str],
) -> Outcome:
    """Run `job` on `nproc` local ranks; `handler(method, args)` receives rank 0's reports as they come.

    `where(progress_value)` turns a rank's progress counter into words for messages.
    """
    _quiet_resource_tracker()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    progress = ctx.Array("q", nproc, lock=False)
    stage = ctx.Array("b", nproc, lock=False)
    with tempfile.TemporaryDirectory(prefix="linkscope-rdzv-") as tmp:
        init_method = "file://" + str(Path(tmp) / "rendezvous")
        procs = [
            ctx.Process(target=_worker_main, daemon=True,
                        args=(r, nproc, init_method, job, q, progress, timeout_s, os.getpid(), stage))
            for r in range(nproc)
        ]
        watch = _Watch(procs, q, progress, handler, stage)
        with _sigterm_as_interrupt():
            try:
                for p in procs:
                    p.start()
                outcome = _monitor(watch, timeout_s, where)
            except (KeyboardInterrupt, _Interrupted):
                watch.pump(0)
                outcome = Outcome("interrupted", f"interrupted {where(min(watch.progress))}", [])
            finally:
                _stop(procs)
        watch.pump(0)
    return outcome
