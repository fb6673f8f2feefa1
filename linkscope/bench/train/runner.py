"""Running training points end to end: ranks (linkscope's launcher or torchrun), live output, the store.

    from linkscope.bench.train.runner import TrainPlan, run_points
    result = run_points([TrainPlan("", cfg, 2)], emit=print)

Each point is one launch of the ranks (under torchrun, one pass of the ranks already started, or of the first
of them for a `--scaling` count); all points of a call are one stored run of kind `train`. A rank that dies or
hangs, or Ctrl-C, ends the run with exit code 3 and every step measured so far stored as `incomplete`; the
points not yet started are not run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from linkscope.bench.comm import default_nproc, init_rank, resolve_backend
from linkscope.bench.events import NullSink
from linkscope.bench.jobs import Job, run_guarded, run_job
from linkscope.bench.launch import launch_local, stall_message
from linkscope.bench.layout import RankEnv, torchrun_env
from linkscope.bench.recorder import final_status
from linkscope.bench.runinfo import build_run_info
from linkscope.bench.train.config import TrainConfig, check_layout
from linkscope.bench.train.loop import point_advances, points_where, where_label
from linkscope.bench.train.recorder import TrainPoint, TrainRecorder
from linkscope.bench.train.subworld import first_ranks, release, wait_group
from linkscope.hardware.errors import UserError
from linkscope.results.store import ResultStore

Emit = Callable[[str], None]


@dataclass
class TrainPlan:
    """One point to measure: a label (empty for a single run), its config and its rank count (None = default)."""

    label: str
    config: TrainConfig
    ranks: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainRunResult:
    """How a training run ended and what it measured."""

    run_id: str
    db_path: str
    status: str
    exit_code: int
    points: list[TrainPoint]
    error: str | None = None
    backend: str = ""
    system: dict[str, Any] | None = None
    recorder: TrainRecorder | None = None


def _stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def resolve_plans(plans: list[TrainPlan], world: int | None = None) -> tuple[str, list[TrainPlan]]:
    """The backend and every plan's rank count, checked against the layout (UserError before any rank starts)."""
    first = plans[0].config
    backend = resolve_backend(first.run.backend)
    out = []
    for plan in plans:
        ranks = (plan.ranks or world) if world else plan.ranks or plan.config.run.nproc or default_nproc(backend)
        if backend == "nccl" and world is None and ranks > default_nproc("nccl"):
            raise UserError(f"{ranks} is more than the {default_nproc('nccl')} visible GPUs", field="nproc")
        check_layout(plan.config, ranks)
        run = replace(plan.config.run, backend=backend, nproc=ranks)
        out.append(replace(plan, config=replace(plan.config, run=run), ranks=ranks))
    return backend, out


def run_points(plans: list[TrainPlan], emit: Emit | None = None) -> TrainRunResult:
    """Measure every plan in order as one stored run."""
    emit = emit or _stdout
    env = torchrun_env()
    if env is not None:
        return _run_torchrun(plans, env, emit)
    backend, plans = resolve_plans(plans)
    first = plans[0].config
    recorder = _recorder(first, backend, max(p.ranks or 1 for p in plans), emit)
    status, message = "complete", ""
    try:
        for index, plan in enumerate(plans):
            status, message = _run_local_point(recorder, plan, index)
            if status != "complete":
                break
    except BaseException as exc:
        recorder.close("failed", f"{type(exc).__name__}: {exc}")
        raise
    return _finish(recorder, status, message, backend)


def _recorder(cfg: TrainConfig, backend: str, ranks: int, emit: Emit) -> TrainRecorder:
    store = ResultStore(cfg.run.db_path or None)
    info = build_run_info("train", cfg, backend, ranks)
    recorder = TrainRecorder(store, info, emit, cfg.run.quiet)
    recorder.begin()
    return recorder


def trace_dir(recorder: TrainRecorder, index: int) -> Path:
    """Where a point's per-rank traces go: `traces/<run id>/p<index>` next to the store."""
    path = recorder.store.location.files_dir / "traces" / recorder.info.run_id / f"p{index}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _point_config(recorder: TrainRecorder, plan: TrainPlan, index: int) -> TrainConfig:
    cfg = plan.config
    if cfg.profile_steps:
        cfg = replace(cfg, trace_dir=str(trace_dir(recorder, index)))
    return cfg


def _run_local_point(recorder: TrainRecorder, plan: TrainPlan, index: int) -> tuple[str, str]:
    cfg = _point_config(recorder, plan, index)
    recorder.begin_point(plan.label, plan.ranks or 1, plan.settings)
    outcome = launch_local(Job("train", cfg), plan.ranks or 1, cfg.run.timeout_s, recorder.dispatch, where_label(cfg))
    recorder.end_point("complete" if outcome.status == "complete" else "incomplete")
    return outcome.status, outcome.message


def _finish(recorder: TrainRecorder, outcome_status: str, message: str, backend: str) -> TrainRunResult:
    status, code, error = final_status(outcome_status, [], message)
    recorder.close(status, error)
    return TrainRunResult(run_id=recorder.info.run_id, db_path=recorder.store.where, status=status, exit_code=code,
                          points=list(recorder.points), error=error, backend=backend, system=recorder.info.system,
                          recorder=recorder)


def _run_torchrun(plans: list[TrainPlan], env: RankEnv, emit: Emit) -> TrainRunResult:
    """Under torchrun every rank calls this with the same plans and runs them in order (each point builds its
    own model, wrapper and optimizer); a point of fewer ranks than the job (`--scaling`) runs on the first ones
    over a group of their own while the rest wait. Rank 0 records, the others only measure."""
    from linkscope.bench import torchrun

    backend, plans = resolve_plans(plans, env.world)
    timeout_s = plans[0].config.run.timeout_s
    ctx = init_rank(env, backend, "env://", timeout_s + 60.0, torchrun.store_publisher(env.rank))
    waiter = wait_group() if any(p.ranks != env.world for p in plans) else None
    if env.rank != 0:
        for plan in plans:
            cfg = replace(plan.config, trace_dir=_shared_trace_dir(ctx, ""))
            _on_first_ranks(ctx, plan, cfg, waiter, _measured)
        ctx.close()
        return TrainRunResult("", plans[0].config.run.db_path or "", "complete", 0, [])
    recorder = _recorder(plans[0].config, backend, env.world, emit)
    configs = [_point_config(recorder, plan, i) for i, plan in enumerate(plans)]
    where = points_where([(plan.label, cfg) for plan, cfg in zip(plans, configs)])
    guard = torchrun.RankZeroGuard(recorder, ctx.progress, env.world, timeout_s,
                                   lambda values, own: stall_message(values, timeout_s, where)[0]
                                   if values else where(own))
    guard.start()
    status, message = "complete", ""
    guarded = partial(run_guarded, sink=recorder)
    try:
        for plan, cfg in zip(plans, configs):
            _shared_trace_dir(ctx, cfg.trace_dir)
            recorder.begin_point(plan.label, plan.ranks or env.world, plan.settings)
            status, message = _on_first_ranks(ctx, plan, cfg, waiter, guarded)
            recorder.end_point("complete" if status == "complete" else "incomplete")
            if status != "complete":
                break
    finally:
        guard.stop()
    if status == "complete":
        ctx.close()
    return _finish(recorder, status, message, backend)


def _on_first_ranks(ctx: Any, plan: TrainPlan, cfg: TrainConfig, waiter: Any,
                    run: Callable[[Job, Any], tuple[str, str]]) -> tuple[str, str]:
    """Run one point (`cfg`, the plan's config as this run places it) on the first `plan.ranks` ranks; the others
    skip its progress and wait for it to end."""
    ranks = plan.ranks or ctx.world
    if ctx.rank < ranks:
        sub = first_ranks(ctx, ranks, plan.config.run.timeout_s + 60.0)
        status, message = run(Job("train", cfg), sub)
        if status != "complete":  # the peers may be dead: neither tear down nor wait
            return status, message
        release(sub, ctx)
    else:
        ctx.progress.skip(point_advances(cfg))
    if waiter is not None:
        _barrier(waiter)
    return "complete", ""


def _barrier(group: Any) -> None:
    import torch.distributed as dist

    dist.barrier(group=group)


def _measured(job: Job, ctx: Any) -> tuple[str, str]:
    run_job(job, ctx, NullSink())
    return "complete", ""


def check_scaling_counts(counts: list[int], world: int) -> None:
    """Under torchrun each count runs on the first ranks of the job: it must fit the ranks torchrun started."""
    for count in counts:
        if count > world or world % count:
            raise UserError(f"--scaling: {count} ranks do not fit the {world} ranks torchrun started; give counts "
                            f"that divide {world} (e.g. the ranks of 1, 2, 4 ... nodes)")


def _shared_trace_dir(ctx: Any, mine: str) -> str:
    """Rank 0's trace folder, on every rank (each rank writes its own file into it)."""
    import torch.distributed as dist

    box = [mine]
    dist.broadcast_object_list(box, src=0, group=ctx.ctrl)
    return str(box[0])
