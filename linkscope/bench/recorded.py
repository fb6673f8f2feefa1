"""Running a measured job whose rank 0 reports into one stored run: `bench moe` and `bench kv` end to end.

Outside torchrun linkscope's launcher starts the ranks and the parent process owns the recorder; under torchrun every
rank calls in, rank 0 records and a guard watches the others. Either way a rank that dies or hangs, or Ctrl-C, ends
the run with exit code 3 and what was measured so far stored as `incomplete`; wrong results (the recorder's `wrong`
lines) end it with exit code 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from linkscope.bench.comm import init_rank
from linkscope.bench.events import NullSink
from linkscope.bench.jobs import Job, run_guarded, run_job
from linkscope.bench.launch import launch_local, stall_message
from linkscope.bench.layout import RankEnv
from linkscope.bench.recorder import final_status
from linkscope.bench.run_recorder import RunRecorder

Emit = Callable[[str], None]


R = TypeVar("R", bound=RunRecorder)


@dataclass
class RecordedResult(Generic[R]):
    """How the run ended, and its recorder (None on torchrun ranks other than 0)."""

    run_id: str
    db_path: str
    status: str
    exit_code: int
    error: str | None = None
    recorder: R | None = None


def stdout(line: str) -> None:
    """Print one line and flush (progress lines must show as they come)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def finish(recorder: R, outcome_status: str, message: str) -> RecordedResult[R]:
    """Store the final status from how the ranks ended and the wrong results seen."""
    status, code, error = final_status(outcome_status, getattr(recorder, "wrong", []), message)
    recorder.close(status, error)
    return RecordedResult(recorder.info.run_id, recorder.store.where, status, code, error, recorder)


def run_local(job: Job, nproc: int, timeout_s: float, recorder: R, where: Callable[[int], str]) -> RecordedResult[R]:
    """Launch `nproc` local ranks on `job`, the parent recording through `recorder` (already begun)."""
    try:
        outcome = launch_local(job, nproc, timeout_s, recorder.dispatch, where)
    except BaseException as exc:
        recorder.close("failed", f"{type(exc).__name__}: {exc}")
        raise
    return finish(recorder, outcome.status, outcome.message)


def run_torchrun(job: Job, env: RankEnv, backend: str, timeout_s: float, make_recorder: Callable[[], R],
                 where: Callable[[int], str], db_path: str) -> RecordedResult[R]:
    """Every rank under torchrun calls this; rank 0 records, the others only measure."""
    from linkscope.bench import torchrun

    ctx = init_rank(env, backend, "env://", timeout_s + 60.0, torchrun.store_publisher(env.rank))
    if env.rank != 0:
        run_job(job, ctx, NullSink())
        ctx.close()
        return RecordedResult("", db_path, "complete", 0)
    recorder = make_recorder()
    guard = torchrun.RankZeroGuard(recorder, ctx.progress, env.world, timeout_s,
                                   lambda values, own, frozen: stall_message(values, timeout_s, where,
                                                                             frozen)[0] if values else where(own))
    guard.start()
    reports: Any = recorder  # a job's recorder is the sink its kind reports to
    status, message = run_guarded(job, ctx, reports)
    guard.stop()
    if status == "complete":
        ctx.close()
    return finish(recorder, status, message)
