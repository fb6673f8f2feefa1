"""A training step model fitted to measured steps, for machines the datasheet model cannot describe (CPU ranks).

Per rank and step the time is a non-negative sum of what the step does, each term with one fitted rate:

    step_time_s = flops / F  +  layer_passes * c_layer  +  params * c_param  +  bus_bytes / B
                  +  collective_calls * c_call  +  c_step

`flops` are the hardware FLOPs (the model FLOP convention of `ModelConfig.model_flops_per_token`, plus the
forward redone by full recomputation), `layer_passes` the layers run per step (fixed per-operator cost),
`params` what this rank's optimizer updates, `bus_bytes` what the data-parallel or tensor-parallel collectives
move in nccl-tests' bus-bandwidth convention (collectives.md §1.4), `collective_calls` how many collectives
the step issues (each pays a fixed latency: FSDP's per-layer gathers cost far more than their bytes on CPU
ranks, and DDP's few large buckets far less). Terms whose feature does not vary
independently across the measured points are left out (their cost is carried by the others), so a fit from a
single configuration is a single effective FLOP rate.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import ModelConfig

BENCH_MICRO_BATCH = 2
"""Sequences per rank per step of `bench train` unless --micro-batch says otherwise (no gradient accumulation):
the step this fitted model describes, and so the batch a profile prediction assumes unless told."""

if TYPE_CHECKING:  # profiles load this module, and the step model loads profiles: the prediction is imported late
    from linkscope.model.step.predict import TrainPrediction

FEATURES = ("flops", "layer_passes", "params", "bus_bytes", "collective_calls", "step")
BREAKDOWN = {"flops": "compute_s", "layer_passes": "compute_s", "params": "optimizer_s",
             "bus_bytes": "dp_comm_exposed_s", "collective_calls": "dp_comm_exposed_s", "step": "compute_s"}
RECOMPUTE_FLOPS = 4.0 / 3.0
"""Full recomputation runs the forward twice: 4 units of work where the convention counts 3."""
DDP_FIRST_BUCKET_BYTES = 2**20
"""DDP caps its first rebuilt bucket at 1 MiB (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES) so the reduction
starts early; the rest are `bucket_cap_mb` each."""


@dataclass(frozen=True)
class TrainShape:
    """What a measured (or predicted) training point is: model, per-rank batch, layout, bytes per element."""

    model: ModelConfig
    micro_batch: int
    ranks: int
    tp: int = 1
    zero: int = 0
    recompute: str = "none"
    element_bytes: int = 4
    bucket_mb: float = 25.0
    overlap: bool = True

    @property
    def dp(self) -> int:
        """Data-parallel ranks."""
        return max(self.ranks // self.tp, 1)


def bench_global_batch(ranks: int, tp: int = 1) -> int:
    """The global batch of one `bench train` step on `ranks` ranks with tensor parallelism `tp`: BENCH_MICRO_BATCH
    sequences per data-parallel rank, at least one sequence."""
    return max(BENCH_MICRO_BATCH * ranks // tp, 1)


def features(s: TrainShape) -> dict[str, float]:
    """The step's work on one rank, per FEATURES."""
    m = s.model
    tokens = s.micro_batch * m.seq_len
    flops = m.model_flops_per_token(m.seq_len) * tokens / s.tp
    if s.recompute == "full":
        flops *= RECOMPUTE_FLOPS
    params = m.total_params() / s.tp / (s.dp if s.zero >= 1 else 1)
    return {"flops": flops, "layer_passes": float(m.layers), "params": params,
            "bus_bytes": bus_bytes(s), "collective_calls": collective_calls(s), "step": 1.0}


def collective_calls(s: TrainShape) -> float:
    """Collectives one rank issues per step, as `bench train` lays the step out (bench/train/parallel.py):
    tensor parallelism's inside the layers plus data parallelism's over the dp group."""
    # Megatron's f and g: two all-reduces per layer forward, two in backward.
    tp_calls = 4.0 * s.model.layers if s.tp > 1 else 0.0
    if s.tp > 1 and s.recompute == "full":
        tp_calls += 2.0 * s.model.layers  # the forward's two, again, when backward recomputes it
    if s.dp <= 1:
        return tp_calls
    units = s.model.layers + 1  # fully_shard wraps each layer and the root (embedding, norm, output)
    if s.zero >= 3:
        return tp_calls + 3.0 * units  # all-gather forward, all-gather again in backward, reduce-scatter
    if s.zero >= 1:
        return tp_calls + 2.0 * units  # parameters stay gathered after forward: one all-gather, one reduce-scatter
    grad_bytes = s.model.total_params() / s.tp * s.element_bytes
    bucket_bytes = s.bucket_mb * 2**20
    if not s.overlap:  # reduced after backward in equal buckets
        return tp_calls + float(np.ceil(grad_bytes / bucket_bytes))
    return tp_calls + 1.0 + float(np.ceil(max(grad_bytes - DDP_FIRST_BUCKET_BYTES, 0.0) / bucket_bytes))


def bus_bytes(s: TrainShape) -> float:
    """Bytes the step's collectives move per rank, times nccl-tests' bus factor: tensor parallelism's
    activations plus data parallelism's gradients (or FSDP's shards) over the dp group."""
    m = s.model
    tp_bytes = 0.0
    if s.tp > 1:
        activations = s.micro_batch * m.seq_len * m.hidden * s.element_bytes
        passes = 6 if s.recompute == "full" else 4  # a recomputed forward all-reduces again
        tp_bytes = passes * m.layers * activations * 2 * (s.tp - 1) / s.tp
    if s.dp <= 1:
        return tp_bytes
    grads = m.total_params() / s.tp * s.element_bytes
    share = (s.dp - 1) / s.dp
    if s.zero >= 3:
        return tp_bytes + 3 * grads * share  # all-gather forward and backward, reduce-scatter of gradients
    if s.zero >= 1:
        return tp_bytes + 2 * grads * share  # reduce-scatter of gradients, all-gather of updated parameters
    return tp_bytes + 2 * grads * share


@dataclass(frozen=True)
class TrainFit:
    """Fitted seconds per unit of each feature (0 for terms left out), and the fit's own error."""

    coefficients: dict[str, float]
    points: int
    median_error: float
    max_error: float

    def predict_s(self, s: TrainShape) -> float:
        """Predicted step time."""
        return sum(self.breakdown(s).values())

    def breakdown(self, s: TrainShape) -> dict[str, float]:
        """Predicted step time by part (`predict train`'s breakdown names)."""
        out: dict[str, float] = {}
        for name, value in features(s).items():
            key = BREAKDOWN[name]
            out[key] = out.get(key, 0.0) + self.coefficients.get(name, 0.0) * value
        return out

    @property
    def effective_tflops(self) -> float | None:
        """The fitted FLOP rate F, in TFLOPS."""
        c = self.coefficients.get("flops", 0.0)
        return 1.0 / c / 1e12 if c > 0 else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TrainFit:
        """Back from `as_dict`."""
        return TrainFit(coefficients=dict(data["coefficients"]), points=int(data["points"]),
                        median_error=float(data["median_error"]), max_error=float(data["max_error"]))


def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (drop the most negative term and refit until none is)."""
    active = list(range(a.shape[1]))
    while active:
        x, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (x >= 0).all():
            out = np.zeros(a.shape[1])
            out[active] = x
            return out
        active.pop(int(np.argmin(x)))
    return np.zeros(a.shape[1])


def _chosen(rows: np.ndarray) -> list[int]:
    """Features in FEATURES order, each kept only if it adds a dimension the points can pin down."""
    keep: list[int] = []
    for j in range(rows.shape[1]):
        trial = keep + [j]
        if len(trial) <= rows.shape[0] and np.linalg.matrix_rank(rows[:, trial], tol=1e-9) == len(trial):
            keep = trial
    return keep


def fit_train(shapes: list[TrainShape], step_times_s: list[float]) -> TrainFit:
    """Fit the rates to measured points by least squares on relative error."""
    if not shapes:
        raise UserError("no measured training steps to calibrate from")
    x = np.asarray([[features(s)[f] for f in FEATURES] for s in shapes], dtype=float)
    t = np.asarray(step_times_s, dtype=float)
    rows = x / t[:, None]
    scale = rows.max(axis=0)
    scale[scale == 0] = 1.0
    keep = [j for j in _chosen(rows / scale) if x[:, j].any()]
    beta = np.zeros(len(FEATURES))
    beta[keep] = _nnls(rows[:, keep] / scale[keep], np.ones(len(t))) / scale[keep]
    errors = np.abs(x @ beta - t) / t
    return TrainFit(coefficients={f: float(beta[j]) for j, f in enumerate(FEATURES)}, points=len(t),
                    median_error=float(np.median(errors)), max_error=float(np.max(errors)))


def shape_from_settings(settings: dict[str, Any]) -> TrainShape:
    """The TrainShape of a stored `bench train` point (its `settings`)."""
    return TrainShape(model=ModelConfig(**settings["model"]), micro_batch=int(settings["micro_batch"]),
                      ranks=int(settings["ranks"]), tp=int(settings["tp"]), zero=int(settings["zero"]),
                      recompute=str(settings["recompute"]),
                      element_bytes=4 if settings.get("precision") == "fp32" else 2,
                      bucket_mb=float(settings.get("bucket_mb", 25.0)), overlap=bool(settings.get("overlap", True)))


def _timed(point: dict[str, Any]) -> list[float]:
    return [s["step_time_s"] for s in point.get("steps", []) if s["step"] >= 0]


def fastest_by_label(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of points measured several times under one label (interleaved, so a burst of load on a shared host hits
    one of them), the one with the lowest median step time."""
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for point in points:
        timed = _timed(point)
        if not timed:
            continue
        median = float(np.median(timed))
        label = str(point.get("label", ""))
        if label not in best or median < best[label][0]:
            best[label] = (median, point)
    return [p for _, p in best.values()]


def measured_points(points: list[dict[str, Any]]) -> tuple[list[TrainShape], list[float]]:
    """(shapes, median step times) of the stored full-training points that have timed steps."""
    shapes, times = [], []
    for point in points:
        timed = _timed(point)
        # The fitted CPU step model's features are full training's (weight gradients for every weight);
        # a LoRA point (`bench train --lora`) would bend them.
        if timed and not point["settings"].get("lora_rank"):
            shapes.append(shape_from_settings(point["settings"]))
            # The median: one step slowed by a busy host should not bend the fit.
            times.append(float(np.median(timed)))
    return shapes, times


def predict_on_fit(fit: TrainFit, name: str, job: Job, tp: int, dp: int, zero: int,
                   recompute: str, host_gib: float | None = None) -> TrainPrediction:
    """`predict train --system profile:NAME` for a training calibration: one fixed layout, no search.

    The profile was fitted on CPU ranks, so it predicts CPU ranks of this kind of host: a job whose memory the
    host (`host_gib`, when known) cannot hold, or a figure that comes out not finite or not positive, is refused
    with a UserError naming the profile."""
    from linkscope.model.step.layout import Layout
    from linkscope.model.step.predict import BREAKDOWN_KEYS, TrainPrediction, bottleneck_sentence

    ranks = tp * dp
    if job.global_batch % dp:
        raise UserError(f"{job.global_batch} is not divisible by dp = {dp}", field="global_batch")
    shape = TrainShape(model=job.model, micro_batch=job.global_batch // dp, ranks=ranks, tp=tp, zero=zero,
                       recompute=recompute, element_bytes=4)
    memory = memory_gib_of_layout(job, tp, dp, recompute, zero)
    if host_gib is not None and memory * ranks > host_gib:
        raise UserError(f"{job.model.id} does not fit the CPU ranks profile '{name}' predicts: {memory:,.1f} GiB "
                        f"per rank x {ranks} ranks, and this host has {host_gib:.1f} GiB available; profile "
                        "predictions are for models this host can train")
    step = fit.predict_s(shape)
    parts = fit.breakdown(shape)
    for key, value in parts.items():
        if not math.isfinite(value) or value < 0:
            raise UserError(f"profile '{name}': its fitted {key.removesuffix('_s')} term gives {value!r} s")
    if not math.isfinite(step) or step <= 0:
        raise UserError(f"profile '{name}': the fitted step time comes out as {step!r} s")
    breakdown = {k: parts.get(k, 0.0) for k in BREAKDOWN_KEYS}
    tokens = job.global_batch * job.seq_len
    tflops = job.model.model_flops_per_token(job.seq_len) * tokens / step / ranks / 1e12
    return TrainPrediction(
        system=f"profile:{name}", model=job.model.id, gpus=ranks, nodes=1, global_batch=job.global_batch,
        seq_len=job.seq_len, precision="fp32", step_time_s=step, tokens_per_s=tokens / step, tflops_per_gpu=tflops,
        mfu=0.0, memory_gib_per_gpu=memory, memory_gib_available=(host_gib or 0.0) / ranks, fits=True,
        breakdown=breakdown, rank_kind="CPU rank", total_params=job.model.total_params(),
        active_params=job.model.active_params(), trainable_params=job.model.total_params(),
        parallelism=Layout(tp=tp, pp=1, dp=dp, micro_batch=job.global_batch // dp, recompute=recompute, zero=zero),
        bottleneck=bottleneck_sentence(breakdown, step),
        flags=[f"CPU ranks only: fitted on {fit.points} measured point(s) of CPU ranks (median fit error "
               f"{fit.median_error:.1%}, in-sample; no p10..p90 range); MFU is not defined without a datasheet peak"])


def memory_gib_of_layout(job: Job, tp: int, dp: int, recompute: str, zero: int) -> float:
    """Training memory per rank of one fixed layout (pp = 1) by the model's accounting (Korthikanti et al.)."""
    from linkscope.model.step.layout import single_layout
    from linkscope.model.step.memory import memory_gib_per_gpu

    lay = single_layout(tp=tp, pp=1, dp=dp, mb=job.global_batch // dp, recompute=recompute, zero=zero)
    # The System is not consulted by the memory accounting, only the job and the layout.
    return float(np.asarray(memory_gib_per_gpu(job, None, lay))[0])
