"""Running a sweep or the p2p matrix end to end: ranks, live output, the store, exports.

    from linkscope.bench.config import BenchConfig, RunOptions
    from linkscope.bench.runner import run_bench

    result = run_bench(BenchConfig(ops=("all_reduce",), max_bytes=1 << 20, run=RunOptions(nproc=2)))
    result.run_id, result.rows, result.exit_code

Outside torchrun the calling process starts the ranks, owns the store and the final status
(launch.py). Under torchrun every rank calls the same function; rank 0 owns the store (torchrun.py).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import replace

from linkscope.bench import nccl_capture
from linkscope.bench.comm import RankContext, check_local_nproc, default_nproc, init_rank, resolve_backend
from linkscope.bench.config import BenchConfig, P2PConfig
from linkscope.bench.dtypes import dtype_by_name
from linkscope.bench.events import NullSink, Sink
from linkscope.bench.jobs import Job, run_guarded, run_job
from linkscope.bench.launch import behind_message, launch_local, stall_message
from linkscope.bench.layout import RankEnv, torchrun_env
from linkscope.bench.ops import OPS
from linkscope.bench.recorder import EXIT_FAULT, Recorder, RunResult, final_status
from linkscope.bench.runinfo import build_run_info
from linkscope.bench.sweep import step_label
from linkscope.hardware.errors import FaultError, UserError, write_output
from linkscope.hardware.limits import HOST_BYTES_PER_MESSAGE, check_host_memory
from linkscope.results.export import nccl_choice_lines
from linkscope.results.store import ResultStore

Emit = Callable[[str], None]


def _stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_bench(config: BenchConfig, emit: Emit | None = None) -> RunResult:
    """Measure a collective sweep; rows are printed through `emit` (stdout by default) and stored as they come."""
    return _run(Job("bench", config.validated()), emit or _stdout)


def run_p2p(config: P2PConfig, emit: Emit | None = None) -> RunResult:
    """Measure the pairwise bandwidth/latency matrix and store it."""
    return _run(Job("p2p", config.validated()), emit or _stdout)


def _run(job: Job, emit: Emit) -> RunResult:
    env = torchrun_env()
    if env is not None:
        return _run_torchrun(job, env, emit)
    return _run_local(job, emit)


def check_world(job: Job, backend: str, world: int) -> None:
    """What only the rank count and backend can rule out, before any rank starts."""
    if job.kind == "p2p":
        if world < 2:
            raise UserError("p2p needs at least 2 ranks (--nproc 2 or more)")
        return
    cfg = job.config
    assert isinstance(cfg, BenchConfig)
    for op in cfg.ops:
        if OPS[op].needs_peer and world < 2:
            raise UserError(f"{op} needs at least 2 ranks, but the run has {world}")
        if OPS[op].rooted and cfg.root >= world:
            raise UserError(f"{cfg.root} is not a rank: {op} runs on ranks 0..{world - 1}", field="root")
    check_backend_support(cfg, backend)


def check_backend_support(cfg: BenchConfig, backend: str) -> None:
    """Refuse what the backend cannot do, with the reason (gloo's gaps were found by trying each)."""
    if backend == "gloo" and cfg.cudagraph:
        raise UserError("-G/--cudagraph needs the nccl backend (CUDA graphs capture GPU work)")
    dt = dtype_by_name(cfg.dtype)
    reducing = any(OPS[op].reducing for op in cfg.ops)
    if backend == "gloo" and reducing and cfg.redop == "avg" and not dt.is_float:
        raise UserError(f"gloo cannot average {dt.name} (it divides in floating point); use -o sum, "
                        "or a floating-point -d")


def _where(job: Job) -> Callable[[int], str]:
    config = job.config
    if isinstance(config, BenchConfig):
        return lambda value: step_label(config, value)
    return lambda value: "in the p2p matrix" if value > 0 else "while starting"


def _total_steps(job: Job, world: int) -> int:
    if job.kind == "bench":
        cfg = job.config
        assert isinstance(cfg, BenchConfig)
        return cfg.repeat * len(cfg.ops) * len(cfg.sizes())
    return world * (world - 1)


def _open_store(job: Job) -> ResultStore:
    return ResultStore(job.config.run.db_path or None)


def _resolve(job: Job, world: int | None) -> tuple[Job, int]:
    backend = resolve_backend(job.config.run.backend)
    nproc = world or job.config.run.nproc or default_nproc(backend)
    if backend == "nccl" and world is None and nproc > default_nproc("nccl"):
        raise UserError(f"{nproc} is more than the {default_nproc('nccl')} visible GPUs", field="nproc")
    if world is None:
        check_local_nproc(nproc, backend, job.config.run.oversubscribe)
        if backend != "nccl":
            _check_host_memory(job, nproc)
    check_world(job, backend, nproc)
    run = replace(job.config.run, backend=backend, nproc=nproc)
    return Job(job.kind, replace(job.config, run=run)), nproc


def _check_host_memory(job: Job, nproc: int) -> None:
    """CPU ranks allocate their buffers in host memory: refuse a sweep that cannot fit before starting it."""
    from linkscope.probe.host import available_memory_bytes

    largest = int(getattr(job.config, "max_bytes", 0) or getattr(job.config, "size_bytes", 0))
    what = f"-e/--max-bytes {largest} on {nproc} CPU ranks" if job.kind == "bench" else \
        f"--size {largest} on {nproc} CPU ranks"
    check_host_memory(float(largest) * HOST_BYTES_PER_MESSAGE * nproc, available_memory_bytes(), what)


def _run_local(job: Job, emit: Emit) -> RunResult:
    job, nproc = _resolve(job, None)
    backend = job.config.run.backend
    info = build_run_info(job.kind, job.config, backend, nproc)
    recorder = Recorder(_open_store(job), info, job.config, emit, _total_steps(job, nproc), emit is _stdout)
    recorder.begin()
    try:
        with nccl_capture.capture(backend) as log_dir:
            outcome = launch_local(job, nproc, job.config.run.timeout_s, recorder.dispatch, _where(job))
            if log_dir is not None:
                _store_nccl_logs(recorder, nccl_capture.read_logs(log_dir))
    except BaseException as exc:
        # A failure of linkscope itself (not of a rank): the run must not stay marked as running. A store that went
        # away cannot be told; the next open marks the run incomplete (its launcher is gone by then).
        with contextlib.suppress(FaultError):
            recorder.close("incomplete" if isinstance(exc, FaultError) else "failed",
                           str(exc) if isinstance(exc, FaultError) else f"{type(exc).__name__}: {exc}")
        raise
    return _finish(recorder, outcome.status, outcome.message)


def _store_nccl_logs(recorder: Recorder, texts: dict[str, str]) -> None:
    if not texts:
        return
    recorder.info.extra["nccl_log"] = nccl_capture.log_extra(texts, recorder.info.system)
    recorder.store.update_run(recorder.info.run_id, extra=recorder.info.extra)
    choices = recorder.info.extra["nccl_log"].get("analysis", {}).get("tuning", [])
    changed = nccl_capture.apply_choices(recorder.stored, choices, recorder.info.world_size)
    if changed:
        recorder.store.set_nccl_choices(recorder.info.run_id, changed)
        recorder.lines(nccl_choice_lines(changed))


def _finish(recorder: Recorder, outcome_status: str, message: str) -> RunResult:
    status, code, error = final_status(outcome_status, recorder.wrong, message)
    recorder.close(status, error)
    result = RunResult(
        run_id=recorder.info.run_id,
        db_path=recorder.store.where,
        status=status,
        exit_code=code,
        rows=list(recorder.stored),
        pair_rows=list(recorder.pairs),
        error=error,
        info=recorder.info,
    )
    write_exports(result, recorder.cfg)
    return result


def write_exports(result: RunResult, cfg: BenchConfig | P2PConfig) -> None:
    """`--json FILE` (nccl-tests' -J layout plus linkscope's keys) and `--csv FILE`."""
    from linkscope.results.export import run_to_csv, run_to_json

    try:
        if cfg.run.json_path and result.info is not None:
            data = run_to_json(result.info, result.rows, result.pair_rows)
            write_output(cfg.run.json_path, json.dumps(data, indent=2, default=str) + "\n", "--json-file")
        if cfg.run.csv_path:
            write_output(cfg.run.csv_path, run_to_csv(result.rows), "--csv")
    except UserError as exc:  # a full disk or a path gone since the start: the run itself is stored
        raise FaultError(f"{exc}; the measurements are stored as run {result.run_id}") from None


def _run_torchrun(job: Job, env: RankEnv, emit: Emit) -> RunResult:
    """Every rank under torchrun calls this; rank 0 records, the others only measure."""
    from linkscope.bench import torchrun

    job, _ = _resolve(job, env.world)
    cfg = job.config
    if nccl_capture.wants_capture(cfg.run.backend):
        nccl_capture.set_capture_env(nccl_capture.node_log_dir())
    ctx = init_rank(env, cfg.run.backend, "env://", cfg.run.timeout_s + 60.0,
                    torchrun.store_publisher(env.rank), getattr(cfg, "cudagraph", 0))
    if env.rank != 0:
        return _torchrun_worker(job, ctx)
    recorder = Recorder(_open_store(job), build_run_info(job.kind, cfg, cfg.run.backend, env.world), cfg, emit,
                        _total_steps(job, env.world), emit is _stdout)
    recorder.begin()
    guard = torchrun.RankZeroGuard(recorder, ctx.progress, env.world, cfg.run.timeout_s,
                                   _describe_stall(job, cfg.run.timeout_s))
    guard.start()
    status, message = _guarded_job(job, ctx, recorder)
    guard.stop()
    return _finish(recorder, status, message)


def _describe_stall(job: Job, timeout_s: float) -> Callable[[list[int] | None, int, list[int]], str]:
    where = _where(job)

    def describe(values: list[int] | None, own: int, frozen: list[int]) -> str:
        if not values:
            return where(own)
        return stall_message(values, timeout_s, where, frozen)[0]

    return describe


def _guarded_job(job: Job, ctx: RankContext, recorder: Recorder) -> tuple[str, str]:
    from linkscope.bench.torchrun import read_progress

    def behind() -> str:
        values = read_progress(ctx.world)
        return behind_message(values, _where(job)) if values else ""

    status, message = run_guarded(job, ctx, recorder, behind)
    if status != "complete":
        return status, message
    _store_nccl_logs(recorder, nccl_capture.gather_rank_logs(ctx))
    ctx.close()
    return "complete", ""


def _torchrun_worker(job: Job, ctx: RankContext) -> RunResult:
    sink: Sink = NullSink()
    run_job(job, ctx, sink)
    nccl_capture.gather_rank_logs(ctx)
    ctx.close()
    return RunResult(run_id="", db_path=job.config.run.db_path or "", status="complete", exit_code=0)


__all__ = ["EXIT_FAULT", "RunResult", "check_world", "run_bench", "run_p2p", "write_exports"]
