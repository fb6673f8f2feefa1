"""Running `bench moe` end to end: ranks (linkscope's launcher or torchrun), the store, the final status.

    from linkscope.bench.moe.runner import run_moe_bench
    result = run_moe_bench(MoeConfig(tokens_per_rank=256, hidden=512, topk=2, experts=8, run=RunOptions(nproc=2)))

A rank that dies or hangs, or Ctrl-C, ends the run with exit code 3 and what was measured so far stored as
`incomplete`.
"""

from __future__ import annotations

from dataclasses import replace

from linkscope.bench.comm import check_local_nproc, default_nproc, resolve_backend
from linkscope.bench.jobs import Job
from linkscope.bench.layout import torchrun_env
from linkscope.bench.moe.config import MoeConfig, check_world
from linkscope.bench.moe.loop import where_label
from linkscope.bench.moe.recorder import MoeRecorder
from linkscope.bench.recorded import Emit, RecordedResult, run_local, run_torchrun, stdout
from linkscope.bench.runinfo import build_run_info
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import check_host_memory
from linkscope.results.store import ResultStore

MoeRunResult = RecordedResult[MoeRecorder]
"""How a `bench moe` run ended, and its recorder (None on torchrun ranks other than 0)."""
__all__ = ["Emit", "MoeRunResult", "resolve_config", "run_moe_bench"]


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


def _recorder(cfg: MoeConfig, emit: Emit) -> MoeRecorder:
    info = build_run_info("moe", cfg, cfg.run.backend, cfg.run.nproc or 2)
    recorder = MoeRecorder(ResultStore(cfg.run.db_path or None), info, emit, cfg.run.quiet)
    recorder.begin()
    return recorder


def run_moe_bench(cfg: MoeConfig, emit: Emit | None = None) -> MoeRunResult:
    """Measure one dispatch/combine shape (`cfg` as `resolve_config` returns it, or raw) and store the run."""
    emit = emit or stdout
    env = torchrun_env()
    if env is not None:
        cfg = resolve_config(cfg, env.world)
        return run_torchrun(Job("moe", cfg), env, cfg.run.backend, cfg.run.timeout_s, lambda: _recorder(cfg, emit),
                            where_label(cfg), cfg.run.db_path or "")
    cfg = resolve_config(cfg)
    return run_local(Job("moe", cfg), cfg.run.nproc or 2, cfg.run.timeout_s, _recorder(cfg, emit), where_label(cfg))
