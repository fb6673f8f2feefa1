"""A training calibration on GPUs: how the measured compute compares with the datasheet step model's.

On GPU ranks the step model has a datasheet to work from, so a `bench train` run does not need a fitted step
model (that is `train_fit`, for CPU ranks); it needs to know how far this GPU's kernels are from what the model
assumes. Per measured point:

    compute_time_ratio = (measured step time - measured exposed communication)
                         / (predicted step time - predicted exposed communication)

the measured exposed communication coming from the point's trace (HolisticTraceAnalysis's definition), or,
for a point traced with `--profile-steps 0`, the model's own. The profile keeps the median over the points.
A prediction on the profile runs the step model with every compute rate (GEMM shares of peak, the fused
attention share, the HBM share, the per-layer overhead) scaled by it, so compute, recomputation and the
optimizer take `compute_time_ratio` times as long, and what the communication hides changes with them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step.compute import ComputeConstants, compute_constants, constants_override
from linkscope.model.step.job import Job
from linkscope.model.step.peft import Peft
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.transformer import ModelConfig

if TYPE_CHECKING:
    from linkscope.model.calibration.profiles import Profile

COMM_KEYS = ("tp_comm_exposed_s", "cp_comm_exposed_s", "pp_comm_exposed_s", "dp_comm_exposed_s")
"""The parts of `predict train`'s breakdown that are exposed communication; the rest is compute."""

MAX_COMPUTE_TIME_RATIO = 1000.0
"""Measured compute time over the datasheet model's: a GPU 1000 times slower than its datasheet is a broken
calibration, and a larger stored ratio (1e308) would overflow the step time."""


def measured_job(model: ModelConfig, micro_batch: int, ranks: int, tp: int, precision: str, overlap: bool,
                 peft: Peft | None = None) -> Job:
    """The job of a measured point: its per-rank batch on every data-parallel replica. CPU ranks' fp32 is
    predicted in bf16 (the model has no fp32 GEMM peak)."""
    dp = max(ranks // tp, 1)
    return Job(model=model, global_batch=micro_batch * dp, seq_len=model.seq_len,
               precision="bf16" if precision == "fp32" else precision, dp_overlap=overlap, peft=peft)


def measured_request(micro_batch: int, ranks: int, tp: int, zero: int, recompute: str,
                     ep: int = 1) -> LayoutRequest:
    """The one layout a point measured (nothing searched; `ep` matters for an MoE model only)."""
    return LayoutRequest(tp=tp, pp=1, dp=max(ranks // tp, 1), cp=1, interleave=1, micro_batch=micro_batch,
                         recompute=recompute, zero=zero, sequence_parallel=False, ep=ep)


def _settings_job(settings: dict[str, Any]) -> tuple[Job, LayoutRequest, int]:
    model = ModelConfig(**settings["model"])
    ranks, tp, mb = int(settings["ranks"]), int(settings["tp"]), int(settings["micro_batch"])
    rank = int(settings.get("lora_rank", 0))
    peft = Peft(rank=rank, targets=str(settings.get("lora_targets", "attn"))) if rank else None
    job = measured_job(model, mb, ranks, tp, str(settings["precision"]), bool(settings.get("overlap", True)), peft)
    return job, measured_request(mb, ranks, tp, int(settings["zero"]), str(settings["recompute"]),
                                 int(settings.get("ep", 1))), ranks


@dataclass(frozen=True)
class PointRatio:
    """One measured point against the model."""

    label: str
    measured_compute_s: float
    predicted_compute_s: float
    comm_from: str
    """`trace` (the point's measured exposed communication) or `prediction` (no trace: the model's)."""

    @property
    def ratio(self) -> float:
        """Measured over predicted compute time."""
        return self.measured_compute_s / self.predicted_compute_s


@dataclass(frozen=True)
class ComputeScale:
    """What a GPU training run says about the step model's compute on that GPU."""

    compute_time_ratio: float
    gpu: str
    precision: str
    points: list[dict[str, Any]] = field(default_factory=list)
    constants_as_of: str = ""
    """The compute constants the ratio was measured against (a later model release may need a new calibration)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, as the profile stores it."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any], where: str) -> ComputeScale:
        """Back from `as_dict`, checked (UserError naming `where` when the stored ratio cannot be used)."""
        try:
            ratio = float(data["compute_time_ratio"])
            scale = ComputeScale(compute_time_ratio=ratio, gpu=str(data["gpu"]), precision=str(data["precision"]),
                                 points=list(data.get("points") or []),
                                 constants_as_of=str(data.get("constants_as_of", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{where}: not a valid GPU training calibration ({type(exc).__name__}: {exc})") from None
        if not math.isfinite(ratio) or ratio <= 0 or ratio > MAX_COMPUTE_TIME_RATIO:
            raise UserError(f"{where}: compute_time_ratio must be a positive number <= {MAX_COMPUTE_TIME_RATIO:g}, "
                            f"got {data['compute_time_ratio']}")
        return scale


def point_ratio(point: dict[str, Any], doc: dict[str, Any] | None, system: System,
                tiers: CommTiers | None = None) -> PointRatio | None:
    """A stored `bench train` point (its settings and timed steps) and its document (for the trace) against
    the datasheet model on `system`; None when the point has no timed steps."""
    from linkscope.model.step.predict import predict_train

    timed = [s["step_time_s"] for s in point.get("steps", []) if s["step"] >= 0]
    if not timed:
        return None
    job, request, ranks = _settings_job(point["settings"])
    try:
        sized = system.with_gpus(ranks)
    except ValueError as exc:
        raise UserError(f"the run's System cannot hold its {ranks} ranks: {exc}") from None
    predicted = predict_train(job, sized, request, tiers)
    predicted_comm_s = sum(predicted.breakdown.get(k, 0.0) for k in COMM_KEYS)
    traced = doc is not None and doc.get("trace") is not None
    measured_comm_s = sum((doc or {}).get("exposed_comm_s", {}).values()) if traced else predicted_comm_s
    # The median step: one step slowed by another job on the machine should not move the ratio.
    measured_s = float(np.median(timed)) - measured_comm_s
    compute_s = predicted.step_time_s - predicted_comm_s
    if measured_s <= 0 or compute_s <= 0:
        raise UserError(f"point '{point.get('label', '')}': the exposed communication ({measured_comm_s:.4g} s) "
                        f"is not less than the step time; nothing is left to calibrate the compute from")
    return PointRatio(str(point.get("label", "")), measured_s, compute_s, "trace" if traced else "prediction")


def fit_compute_scale(points: list[dict[str, Any]], docs: list[dict[str, Any]], system: System,
                      tiers: CommTiers | None = None) -> ComputeScale:
    """The median compute-time ratio over a GPU run's points (`docs` aligned with `points` where present)."""
    ratios = []
    for i, point in enumerate(points):
        found = point_ratio(point, docs[i] if i < len(docs) else None, system, tiers)
        if found is not None:
            ratios.append(found)
    if not ratios:
        raise UserError("no timed training steps to calibrate from")
    precision = str(points[0]["settings"].get("precision", "bf16"))
    if precision == "fp32":
        # The step model has no FP32 GEMM peak and predicts such runs in BF16: the ratio would mix the two.
        raise UserError("a GPU training run in fp32 cannot calibrate the compute model; measure with "
                        "--precision bf16 or fp16", field="precision")
    ratio = float(np.median([r.ratio for r in ratios]))
    _check_physical(ratio)
    return ComputeScale(
        compute_time_ratio=ratio, gpu=system.node.gpu.id, precision=precision,
        points=[{**asdict(r), "ratio": r.ratio} for r in ratios], constants_as_of=str(compute_constants().as_of))


def _check_physical(ratio: float) -> None:
    """A ratio that puts any compute share above the datasheet peak is a measurement problem, not a profile."""
    c = scaled_constants(compute_constants(), ratio)
    shares = [c.gemm_efficiency_max, c.flash_attention_efficiency, c.hbm_efficiency,
              *c.gemm_efficiency_by_arch.values()]
    if not np.isfinite(ratio) or ratio <= 0 or max(shares) > 1.0:
        raise UserError(f"the measured compute is {ratio:.3g}x the model's, faster than the GPU's datasheet peak "
                        "allows; the trace's exposed communication is probably overestimated (not saved)")


def scaled_constants(c: ComputeConstants, compute_time_ratio: float) -> ComputeConstants:
    """`c` with every compute rate divided by the ratio (and the fixed per-layer cost multiplied), so each
    compute kernel of the step model takes `compute_time_ratio` times as long; memory accounting unchanged."""
    r = compute_time_ratio
    return c.model_copy(update={
        "gemm_efficiency_max": c.gemm_efficiency_max / r,
        "gemm_efficiency_by_arch": {k: v / r for k, v in c.gemm_efficiency_by_arch.items()},
        "flash_attention_efficiency": c.flash_attention_efficiency / r,
        "hbm_efficiency": c.hbm_efficiency / r,
        "layer_overhead_us": c.layer_overhead_us * r,
    })


@contextmanager
def scaled_compute(compute_time_ratio: float) -> Iterator[None]:
    """Predict with the compute scaled by a measured ratio (see `scaled_constants`)."""
    with constants_override(scaled_constants(compute_constants(), compute_time_ratio)):
        yield


def compute_scaling(scale: ComputeScale | None) -> AbstractContextManager[None]:
    """`scaled_compute` for a profile's scale, or nothing to change."""
    return scaled_compute(scale.compute_time_ratio) if scale is not None else nullcontext()


def scale_note(profile_name: str, scale: ComputeScale) -> str:
    """The sentence a prediction on the profile carries."""
    return (f"compute time x{scale.compute_time_ratio:.3g} of the datasheet model's, as measured on "
            f"{scale.gpu} by profile {profile_name} ({len(scale.points)} point(s), {scale.precision})")


def profile_scale(profile: Profile) -> ComputeScale | None:
    """The GPU training calibration a profile holds, checked; None when it holds none."""
    if profile.train_compute is None:
        return None
    return ComputeScale.from_dict(profile.train_compute, f"profile '{profile.name}'")
