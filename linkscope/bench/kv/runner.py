"""Running `bench kv` end to end: ranks (linkscope's launcher or torchrun), the store, the final status.

    from linkscope.bench.kv.runner import run_kv_bench
    result = run_kv_bench(KvConfig(layers=4, kv_heads=2, head_dim=64, tokens=256, run=RunOptions(nproc=2)))
"""

from __future__ import annotations

from dataclasses import replace

from linkscope.bench.comm import check_local_nproc, default_nproc, resolve_backend
from linkscope.bench.jobs import Job
from linkscope.bench.kv.config import KvConfig, check_world
from linkscope.bench.kv.loop import where_label
from linkscope.bench.kv.recorder import KvRecorder
from linkscope.bench.layout import torchrun_env
from linkscope.bench.recorded import Emit, RecordedResult, run_local, run_torchrun, stdout
from linkscope.bench.runinfo import build_run_info
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import HOST_BYTES_PER_MESSAGE, check_host_memory
from linkscope.results.store import ResultStore

KvRunResult = RecordedResult[KvRecorder]


def resolve_config(cfg: KvConfig, world: int | None = None) -> KvConfig:
    """The backend and rank count, checked against the pages and the host (UserError before any rank starts)."""
    cfg = cfg.validated()
    backend = resolve_backend(cfg.run.backend)
    nproc = world or cfg.run.nproc or default_nproc(backend)
    if backend == "nccl" and world is None and nproc > default_nproc("nccl"):
        raise UserError(f"{nproc} is more than the {default_nproc('nccl')} visible GPUs", field="nproc")
    if world is None:
        check_local_nproc(nproc, backend, cfg.run.oversubscribe)
    check_world(nproc)
    if backend != "nccl" and world is None:
        from linkscope.probe.host import available_memory_bytes

        # Each CPU rank holds its pages once; the backend's staging can take as much again.
        check_host_memory(cfg.rank_bytes() * nproc * HOST_BYTES_PER_MESSAGE / 1.5, available_memory_bytes(),
                          f"{cfg.tokens} tokens x {max(cfg.in_flight)} requests in flight on {nproc} CPU ranks")
    return replace(cfg, run=replace(cfg.run, backend=backend, nproc=nproc))


def _recorder(cfg: KvConfig, emit: Emit) -> KvRecorder:
    info = build_run_info("kv", cfg, cfg.run.backend, cfg.run.nproc or 2)
    recorder = KvRecorder(ResultStore(cfg.run.db_path or None), info, emit, cfg.run.quiet)
    recorder.begin()
    return recorder


def run_kv_bench(cfg: KvConfig, emit: Emit | None = None) -> KvRunResult:
    """Measure every point of `cfg` (as `resolve_config` returns it, or raw) and store the run."""
    emit = emit or stdout
    env = torchrun_env()
    if env is not None:
        cfg = resolve_config(cfg, env.world)
        return run_torchrun(Job("kv", cfg), env, cfg.run.backend, cfg.run.timeout_s, lambda: _recorder(cfg, emit),
                            where_label(cfg), cfg.run.db_path or "")
    cfg = resolve_config(cfg)
    return run_local(Job("kv", cfg), cfg.run.nproc or 2, cfg.run.timeout_s, _recorder(cfg, emit), where_label(cfg))
