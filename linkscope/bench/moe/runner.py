"""Running `bench moe` end to end: ranks (linkscope's launcher or torchrun), the store, the final status.

    from linkscope.bench.moe.runner import run_moe_bench
    result = run_moe_bench(MoeConfig(tokens_per_rank=256, hidden=512, topk=2, experts=8, run=RunOptions(nproc=2)))

A rank that dies or hangs, or Ctrl-C, ends the run with exit code 3 and what was measured so far stored as
`incomplete`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

from linkscope.bench.comm import check_local_nproc, default_nproc, init_rank, resolve_backend
from linkscope.bench.events import NullSink
from linkscope.bench.jobs import Job, run_guarded, run_job
from linkscope.bench.launch import launch_local, stall_message
from linkscope.bench.layout import RankEnv, torchrun_env
from linkscope.bench.moe.config import MoeConfig, check_world
from linkscope.bench.moe.loop import where_label
from linkscope.bench.moe.recorder import MoeRecorder
from linkscope.bench.recorder import final_status
from linkscope.bench.runinfo import build_run_info
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import check_host_memory
from linkscope.results.store import ResultStore

Emit = Callable[[str], None]


@dataclass
class MoeRunResult:
    """How a `bench moe` run ended, and its recorder (None on torchrun ranks other than 0)."""

    run_id: str
    db_path: str
    status: str
    exit_code: int
    error: str | None = None
    recorder: MoeRecorder | None = None


def _stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def resolve_config(cfg: MoeConfig, world: int | None = None) -> MoeConfig:
    """The backend and rank count, checked against the shape and the host (UserError before any rank starts)."""
    cfg = cfg.validated()
    backend = resolve_backend(cfg.run.backend)
    nproc = world or cfg.run.nproc or default_nproc(backend)
    if backend == "nccl" and world is None and nproc > default_nproc("nccl"):
        raise UserError(f"{nproc} is more than the {default_nproc('nccl')} visible GPUs", field="nproc")
    if world is None:
        check_local_nproc(nproc, backend, cfg.run.oversubscribe)
    check_world(cfg, nproc)
    if backend != "nccl" and world is None:
        from linkscope.probe.host import available_memory_bytes

        check_host_memory(cfg.host_bytes_per_rank(nproc) * nproc, available_memory_bytes(),
                          f"--tokens-per-rank {cfg.tokens_per_rank} x --hidden {cfg.hidden} on {nproc} CPU ranks")
    return replace(cfg, run=replace(cfg.run, backend=backend, nproc=nproc))


def run_moe_bench(cfg: MoeConfig, emit: Emit | None = None) -> MoeRunResult:
    """Measure one dispatch/combine shape (`cfg` as `resolve_config` returns it, or raw) and store the run."""
    emit = emit or _stdout
    env = torchrun_env()
    if env is not None:
        return _run_torchrun(cfg, env, emit)
    cfg = resolve_config(cfg)
    recorder = _recorder(cfg, emit)
    try:
        outcome = launch_local(Job("moe", cfg), cfg.run.nproc or 2, cfg.run.timeout_s, recorder.dispatch,
                               where_label(cfg))
    except BaseException as exc:
        recorder.close("failed", f"{type(exc).__name__}: {exc}")
        raise
    return _finish(recorder, outcome.status, outcome.message)


def _recorder(cfg: MoeConfig, emit: Emit) -> MoeRecorder:
    info = build_run_info("moe", cfg, cfg.run.backend, cfg.run.nproc or 2)
    recorder = MoeRecorder(ResultStore(cfg.run.db_path or None), info, emit, cfg.run.quiet)
    recorder.begin()
    return recorder


def _finish(recorder: MoeRecorder, outcome_status: str, message: str) -> MoeRunResult:
    status, code, error = final_status(outcome_status, recorder.wrong, message)
    recorder.close(status, error)
    return MoeRunResult(recorder.info.run_id, recorder.store.where, status, code, error, recorder)


def _run_torchrun(cfg: MoeConfig, env: RankEnv, emit: Emit) -> MoeRunResult:
    """Every rank under torchrun calls this; rank 0 records, the others only measure."""
    from linkscope.bench import torchrun

    cfg = resolve_config(cfg, env.world)
    ctx = init_rank(env, cfg.run.backend, "env://", cfg.run.timeout_s + 60.0, torchrun.store_publisher(env.rank))
    job = Job("moe", cfg)
    if env.rank != 0:
        run_job(job, ctx, NullSink())
        ctx.close()
        return MoeRunResult("", cfg.run.db_path or "", "complete", 0)
    recorder = _recorder(cfg, emit)
    where = where_label(cfg)
    guard = torchrun.RankZeroGuard(recorder, ctx.progress, env.world, cfg.run.timeout_s,
                                   lambda values, own, frozen: stall_message(values, cfg.run.timeout_s, where,
                                                                             frozen)[0] if values else where(own))
    guard.start()
    status, message = run_guarded(job, ctx, recorder)
    guard.stop()
    if status == "complete":
        ctx.close()
    return _finish(recorder, status, message)
