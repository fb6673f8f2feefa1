"""What every rank runs once it has joined the process group: a collective sweep, the p2p matrix, training steps,
MoE dispatch and combine, or KV-cache pages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from linkscope.bench.comm import RankContext
from linkscope.bench.config import BenchConfig, P2PConfig
from linkscope.bench.events import KvSink, MoeSink, Sink, TrainSink
from linkscope.bench.kv.config import KvConfig
from linkscope.bench.moe.config import MoeConfig
from linkscope.bench.train.config import TrainConfig
from linkscope.hardware.errors import UserError


@dataclass
class Job:
    """A picklable description of the work, sent to every spawned rank."""

    kind: Literal["bench", "p2p", "train", "moe", "kv"]
    """The stored run's kind (a `RunKind`)."""
    config: BenchConfig | P2PConfig | TrainConfig | MoeConfig | KvConfig


def run_job(job: Job, ctx: RankContext, sink: Sink | TrainSink | MoeSink | KvSink) -> None:
    """Report the rank layout, run the job, and wait for every rank to finish it."""
    try:
        _run(job, ctx, sink)
    except RuntimeError as exc:
        # torch refuses some reductions per backend and release (older gloo has no AVG at all).
        if "Cannot use ReduceOp" in str(exc):
            raise UserError(f"the {ctx.backend} backend of this torch cannot do that: {exc}") from None
        raise


def _nobody_behind() -> str:
    return ""


def run_guarded(job: Job, ctx: RankContext, sink: Sink | TrainSink | MoeSink | KvSink,
                behind: Callable[[], str] = _nobody_behind) -> tuple[str, str]:
    """Rank 0 under torchrun: run the job and turn how it ended into (outcome, message) for the stored run, so
    the run is recorded as failed or incomplete with its cause instead of left running.

    `behind` names the ranks that had fallen behind; it is asked only after a fault."""
    try:
        run_job(job, ctx, sink)
    except UserError as exc:
        return "user_error", exc.for_flags()
    except Exception as exc:  # the run is recorded as incomplete, with the cause
        lagging = behind()
        cause = f"rank 0 saw {type(exc).__name__}: {exc}".strip()
        return "fault", f"{lagging}; {cause}" if lagging else cause
    return "complete", ""


def _run(job: Job, ctx: RankContext, sink: Sink | TrainSink | MoeSink | KvSink) -> None:
    infos = ctx.gather_infos()
    if ctx.rank == 0:
        sink.started(infos)
    # The config says what runs; the sink is the runner's own (a Sink for sweeps and pairs, a TrainSink for
    # training, a MoeSink, a KvSink), which the union cannot tell apart: each runner passes the one its job reports
    # to, so the sink goes on untyped.
    reports: Any = sink
    config = job.config
    if isinstance(config, BenchConfig):
        from linkscope.bench.sweep import run_sweep

        run_sweep(ctx, config, reports)
    elif isinstance(config, TrainConfig):
        from linkscope.bench.train.loop import run_train

        run_train(ctx, config, reports)
    elif isinstance(config, MoeConfig):
        from linkscope.bench.moe.loop import run_moe

        run_moe(ctx, config, reports)
    elif isinstance(config, KvConfig):
        from linkscope.bench.kv.loop import run_kv

        run_kv(ctx, config, reports)
    else:
        from linkscope.bench.p2p import run_pairs

        run_pairs(ctx, config, reports)
    ctx.barrier()
    if ctx.rank == 0:
        sink.finished()
