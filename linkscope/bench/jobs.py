"""What every rank runs once it has joined the process group: a collective sweep, the p2p matrix or training steps."""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.bench.comm import RankContext
from linkscope.bench.config import BenchConfig, P2PConfig
from linkscope.bench.events import Sink, TrainSink
from linkscope.bench.train.config import TrainConfig
from linkscope.hardware.errors import UserError


@dataclass
class Job:
    """A picklable description of the work, sent to every spawned rank."""

    kind: str
    """`bench`, `p2p` or `train`."""
    config: BenchConfig | P2PConfig | TrainConfig


def run_job(job: Job, ctx: RankContext, sink: Sink | TrainSink) -> None:
    """Report the rank layout, run the job, and wait for every rank to finish it."""
    try:
        _run(job, ctx, sink)
    except RuntimeError as exc:
        # torch refuses some reductions per backend and release (older gloo has no AVG at all).
        if "Cannot use ReduceOp" in str(exc):
            raise UserError(f"the {ctx.backend} backend of this torch cannot do that: {exc}") from None
        raise


def _run(job: Job, ctx: RankContext, sink: Sink | TrainSink) -> None:
    infos = ctx.gather_infos()
    if ctx.rank == 0:
        sink.started(infos)
    if job.kind == "bench":
        from linkscope.bench.sweep import run_sweep

        run_sweep(ctx, job.config, sink)  # type: ignore[arg-type]
    elif job.kind == "train":
        from linkscope.bench.train.loop import run_train

        run_train(ctx, job.config, sink)  # type: ignore[arg-type]
    else:
        from linkscope.bench.p2p import run_pairs

        run_pairs(ctx, job.config, sink)  # type: ignore[arg-type]
    ctx.barrier()
    if ctx.rank == 0:
        sink.finished()
