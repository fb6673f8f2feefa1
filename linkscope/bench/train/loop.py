"""What every rank runs for `bench train`: build, wrap, time `warmup + iters` steps per repeat, then trace a few.

Step timing reuses the collective timers (bench/timing.py): the wall clock on CPU ranks, CUDA events around
the step on GPUs. The profiler runs only on the extra steps it traces, after every timed step, so it never
touches the measured numbers. Rank 0 reports each timed step (the slowest rank's time: a synchronous step is
as slow as its slowest rank) through the sink as it completes.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from linkscope.bench import faults
from linkscope.bench.comm import RankContext
from linkscope.bench.events import TrainSink
from linkscope.bench.train.config import TrainConfig, resolved_precision
from linkscope.bench.train.lora import add_lora
from linkscope.bench.train.model import Decoder, loss_of, parameter_count
from linkscope.bench.train.parallel import Wrapped, wrap_model
from linkscope.bench.train.profiler_noise import without_marker_lines

GIB = float(1 << 30)
DATA_BATCHES = 4
"""Distinct synthetic batches per rank, cycled: few enough that the loss falls within a benchmark's steps."""
TRACE_FILE = "rank{rank}.json"
FAULT_OP = "train"


def synthetic_batches(cfg: TrainConfig, data_rank: int, device: torch.device) -> list[torch.Tensor]:
    """Token sequences that follow a learnable rule (each token is the previous plus a per-sequence stride)."""
    g = torch.Generator().manual_seed(cfg.seed * 1000 + data_rank)
    m = cfg.model
    out = []
    for _ in range(DATA_BATCHES):
        start = torch.randint(0, m.vocab, (cfg.micro_batch, 1), generator=g)
        stride = torch.randint(1, 8, (cfg.micro_batch, 1), generator=g)
        steps = torch.arange(m.seq_len + 1).unsqueeze(0)
        out.append(((start + stride * steps) % m.vocab).to(device))
    return out


class Trainer:
    """One rank's model, optimizer and data; `step()` runs one training step."""

    def __init__(self, cfg: TrainConfig, ctx: RankContext) -> None:
        self.cfg = cfg
        self.ctx = ctx
        if cfg.cpu_threads and ctx.device.type == "cpu":
            torch.set_num_threads(cfg.cpu_threads)
        reset_peak_memory(ctx.device)
        self.base_rss_gib = current_rss_gib()
        self.precision = resolved_precision(cfg, ctx.backend)
        torch.manual_seed(cfg.seed)  # the same initial weights on every rank
        model = Decoder(cfg.model, cfg.recompute, cfg.ep, ctx.rank if cfg.ep > 1 else 0, ctx.group)
        if cfg.peft is not None:
            add_lora(model, cfg.peft)
        model = model.to(ctx.device)
        self.params = parameter_count(model)
        self.trainable_params = parameter_count(model, trainable_only=True)
        self.wrapped: Wrapped = wrap_model(model, cfg, ctx.device, ctx.rank, ctx.world, ctx.group)
        # The fused multi-tensor path cannot mix tensor-parallel DTensors with the replicated plain tensors.
        # A frozen base has no optimizer state: only what trains is handed to the optimizer.
        trained = [p for p in self.wrapped.module.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trained, lr=cfg.lr, foreach=cfg.tp == 1)
        self.batches = synthetic_batches(cfg, self.wrapped.data_rank, ctx.device)
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.count = 0
        self.last_loss = float("nan")

    def _autocast(self) -> Any:
        if self.precision == "fp32":
            return torch.autocast(self.ctx.device.type, enabled=False)
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(self.ctx.device.type, dtype=dtype)

    def step(self) -> None:
        """Forward, backward, gradient reduction and the optimizer step on the next batch."""
        batch = self.batches[self.count % len(self.batches)]
        self.count += 1
        with self.wrapped.sync_context(), self._autocast():
            loss = loss_of(self.wrapped.module(batch[:, :-1]), batch[:, 1:])
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        self.wrapped.after_backward()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.last_loss = float(loss.detach())


def current_rss_gib() -> float:
    """Resident set of this process now (GiB), 0 where /proc cannot say."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * resource.getpagesize() / GIB
    except (OSError, ValueError, IndexError):
        return 0.0


def reset_peak_memory(device: torch.device) -> None:
    """Start the peak afresh: a process that runs several points (a sweep under torchrun) must not report an
    earlier point's peak. On CPU ranks Linux resets the resident high-water mark through clear_refs."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass  # older kernels and some sandboxes refuse it: the peak then spans the process's points


def peak_memory_gib(device: torch.device, base_rss_gib: float) -> float:
    """Peak memory the training took on this rank: allocated on the GPU; on CPU ranks the peak resident set
    above what the process held before the model was built (torch's own libraries are not the model's)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / GIB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
    return max(peak - base_rss_gib, 0.0)


def run_train(ctx: RankContext, cfg: TrainConfig, sink: TrainSink) -> None:
    """Every rank: build, time the steps, trace a few, report to rank 0's sink."""
    trainer = Trainer(cfg, ctx)
    if ctx.rank == 0:
        sink.train_started({"params": trainer.params, "precision": trainer.precision,
                            "tokens_per_step": cfg.micro_batch * cfg.model.seq_len * trainer.wrapped.data_ranks})
    timed: list[float] = []
    for repeat in range(cfg.repeat):
        for i in range(cfg.warmup + cfg.iters):
            seconds = _timed_step(ctx, trainer, repeat, i)
            if i >= cfg.warmup:
                timed.append(seconds)
            _report_step(ctx, sink, trainer, repeat, i - cfg.warmup, seconds)
    peak_gib = peak_memory_gib(ctx.device, trainer.base_rss_gib)
    per_rank = _gather(ctx, {"mean_step_s": sum(timed) / len(timed), "peak_memory_gib": peak_gib})
    if ctx.rank == 0:
        sink.train_ranks(per_rank)
    if cfg.profile_steps and cfg.trace_dir:
        _trace(ctx, trainer, sink)


def _timed_step(ctx: RankContext, trainer: Trainer, repeat: int, i: int) -> float:
    faults.before_size(ctx.rank, FAULT_OP, repeat * (trainer.cfg.warmup + trainer.cfg.iters) + i)
    # Entering and leaving the step both count, so a rank that never enters it falls behind the ones waiting
    # inside it for its collectives, and the watchdog can name it.
    ctx.progress.advance()
    seconds = ctx.timer.loop_seconds(trainer.step, 1, None)
    ctx.progress.advance()
    return seconds


def _report_step(ctx: RankContext, sink: TrainSink, trainer: Trainer, repeat: int, index: int, seconds: float) -> None:
    slowest = ctx.allreduce_float(seconds, "max")
    loss = ctx.allreduce_float(trainer.last_loss, "sum") / ctx.world
    if ctx.rank == 0:
        sink.train_step(repeat, index, slowest, loss)


def _gather(ctx: RankContext, mine: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[Any] = [None] * ctx.world
    dist.all_gather_object(out, mine, group=ctx.ctrl)
    return out


def _trace(ctx: RankContext, trainer: Trainer, sink: TrainSink) -> None:
    """Run `profile_steps` more steps under torch.profiler and write this rank's Kineto JSON."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU]
    if ctx.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    path = Path(trainer.cfg.trace_dir) / TRACE_FILE.format(rank=ctx.rank)
    path.parent.mkdir(parents=True, exist_ok=True)  # on other hosts rank 0's folder does not exist yet
    ctx.barrier()
    start = time.perf_counter()
    prof = profile(activities=activities)
    # Only the profiler's start and stop print kineto's markers; the traced steps write to stderr as usual.
    with without_marker_lines():
        prof.start()
    try:
        for i in range(trainer.cfg.profile_steps):
            # The step marks HTA (and trace_comm) use to count iterations.
            with record_function(f"ProfilerStep#{i}"):
                ctx.timer.loop_seconds(trainer.step, 1, None)
    except BaseException:
        # The step's own error is the one to report, not a profiler that cannot stop after it.
        with contextlib.suppress(Exception), without_marker_lines():
            prof.stop()
        raise
    with without_marker_lines():
        prof.stop()
    wall_s = time.perf_counter() - start
    prof.export_chrome_trace(str(path))
    ctx.progress.advance()
    paths = _gather(ctx, {"path": str(path), "wall_s": wall_s})
    if ctx.rank == 0:
        sink.train_traced([p["path"] for p in paths], max(p["wall_s"] for p in paths) / trainer.cfg.profile_steps)


def where_label(cfg: TrainConfig) -> Callable[[int], str]:
    """Progress counter -> words: 0 starting, 1 joined, then two per step (in, done), then the trace."""
    per_repeat = cfg.warmup + cfg.iters

    def where(value: int) -> str:
        if value <= 0:
            return "while starting"
        done = (value - 1) // 2
        if done >= per_repeat * cfg.repeat:
            return "while tracing"
        repeat, i = divmod(done, per_repeat)
        phase = f"warm-up step {i + 1}" if i < cfg.warmup else f"step {i - cfg.warmup + 1} of {cfg.iters}"
        return f"in {phase}" + (f" of repeat {repeat + 1}" if cfg.repeat > 1 else "")

    return where


def point_advances(cfg: TrainConfig) -> int:
    """How far one point moves a rank's progress counter: in and out of every step, then the trace."""
    return 2 * (cfg.warmup + cfg.iters) * cfg.repeat + (1 if cfg.profile_steps and cfg.trace_dir else 0)


def points_where(points: list[tuple[str, TrainConfig]]) -> Callable[[int], str]:
    """`where_label` for several points run one after another by the same ranks (a sweep under torchrun), where
    the counter keeps counting from one point into the next."""
    labels = [(label, where_label(cfg), point_advances(cfg)) for label, cfg in points]

    def where(value: int) -> str:
        if value <= 0:
            return "while starting"
        local = value
        for i, (label, one, advances) in enumerate(labels):
            if local - 1 < advances or i == len(labels) - 1:
                return one(local) + (f" ({label})" if label else "")
            local -= advances
        return "while starting"  # unreachable: the last point takes what is left

    return where
