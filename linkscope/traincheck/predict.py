"""The prediction beside a training measurement: the datasheet model on a GPU System, or a calibrated fit.

Which one: `--system profile:NAME` with a training calibration uses its fitted step model; any other
`--system` (or the probed System on GPU ranks) uses `predict train`'s model for the exact layout measured.
CPU ranks without a training profile get no prediction (a CPU host is measured and calibrated, never modelled).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.bench.train.config import TrainConfig
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import system_from_dict
from linkscope.model.step.predict import predict_train_on
from linkscope.model.calibration.train_compute import measured_job, measured_request
from linkscope.model.step.search import LayoutRequest
from linkscope.model.calibration.systems import ResolvedSystem, resolve
from linkscope.model.step.job import Job
from linkscope.model.step.knobs import Knobs, knob_facts, model_gradient_mb
from linkscope.model.calibration.train_fit import TrainFit, TrainShape, memory_gib_of_layout

GIB = float(1 << 30)
NO_CPU_MODEL = ("no prediction: CPU ranks are measured and calibrated, never modelled; calibrate this run "
                "(`linkscope calibrate RUN_ID`) and pass --system profile:NAME")


@dataclass
class Prediction:
    """What the model says about one measured point."""

    source: str
    step_time_s: float
    breakdown: dict[str, float]
    memory_gib_per_gpu: float | None
    memory_gib_available: float | None = None
    fits: bool = True
    notes: list[str] = field(default_factory=list)
    parallelism: dict[str, Any] = field(default_factory=dict)
    """The layout predicted (tp, dp, zero, micro_batch, recompute): the one measured, never a searched one."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)


def shape_of(cfg: TrainConfig, ranks: int, precision: str) -> TrainShape:
    """The layout of a measured point, as the fitted step model sees it."""
    return TrainShape(model=cfg.model, micro_batch=cfg.micro_batch, ranks=ranks, tp=cfg.tp, zero=cfg.zero,
                      recompute=cfg.recompute, element_bytes=4 if precision == "fp32" else 2,
                      bucket_mb=cfg.bucket_mb, overlap=cfg.overlap)


def _job(cfg: TrainConfig, ranks: int, precision: str) -> Job:
    return measured_job(cfg.model, cfg.micro_batch, ranks, cfg.tp, precision, cfg.overlap, cfg.peft)


def measured_knobs(cfg: TrainConfig) -> Knobs:
    """The DDP hook and bucket size a run measured, as the step model's knobs. DDP's default bucket with no hook
    is the step model's own baseline, so it stays the plain prediction."""
    if cfg.grad_compression == "none" and cfg.bucket_mb == knob_facts().default_bucket_mb:
        return Knobs()
    # A bucket larger than the model is one bucket (DDP allows it; the step model's option refuses it): priced as
    # the whole model's gradients at their smallest width, so that it never exceeds them.
    bucket_mb = min(cfg.bucket_mb, model_gradient_mb(cfg.model, 2.0))
    return Knobs(compression=cfg.grad_compression, powersgd_rank=cfg.powersgd_rank if cfg.grad_compression ==
                 "powersgd" else 0, bucket_mb=bucket_mb)


def predicted_layout(cfg: TrainConfig, ranks: int) -> dict[str, Any]:
    """The measured layout as the prediction states it."""
    return {"tp": cfg.tp, "dp": max(ranks // cfg.tp, 1), "pp": 1, "ep": cfg.ep, "zero": cfg.zero,
            "micro_batch": cfg.micro_batch, "recompute": cfg.recompute}


def _request(cfg: TrainConfig, ranks: int) -> LayoutRequest:
    return measured_request(cfg.micro_batch, ranks, cfg.tp, cfg.zero, cfg.recompute, cfg.ep)


def _on_system(cfg: TrainConfig, ranks: int, precision: str, resolved: ResolvedSystem) -> Prediction:
    try:
        sized = replace(resolved, found_system=resolved.system.with_gpus(ranks))
    except ValueError as exc:
        raise UserError(f"--system: {exc}") from None
    p = predict_train_on(replace(_job(cfg, ranks, precision), knobs=measured_knobs(cfg)), sized, _request(cfg, ranks))
    notes = [] if precision != "fp32" else ["predicted in bf16 (the model has no fp32 GEMM peak)"]
    return Prediction(source=f"system {resolved.system.id}", step_time_s=p.step_time_s, breakdown=p.breakdown,
                      memory_gib_per_gpu=p.memory_gib_per_gpu, memory_gib_available=p.memory_gib_available,
                      fits=p.fits, notes=notes + p.flags,
                      parallelism={**predicted_layout(cfg, ranks), "tp": p.parallelism.tp, "dp": p.parallelism.dp})


def _on_fit(cfg: TrainConfig, ranks: int, precision: str, name: str, fit: TrainFit) -> Prediction:
    shape = shape_of(cfg, ranks, precision)
    # Said beside the number, so that `compare` on a hooked sweep is not read as a model of the hook.
    notes = [] if cfg.grad_compression == "none" else [
        f"the fitted profile has no compression term: {cfg.grad_compression} is priced as no hook"]
    return Prediction(source=f"profile {name}", step_time_s=fit.predict_s(shape), breakdown=fit.breakdown(shape),
                      notes=notes, memory_gib_per_gpu=host_memory_gib_per_rank(cfg, ranks, precision),
                      memory_gib_available=available_host_gib(), parallelism=predicted_layout(cfg, ranks))


def predict_point(cfg: TrainConfig, ranks: int, precision: str, system_spec: str | None,
                  probed: dict[str, Any] | None) -> tuple[Prediction | None, str]:
    """The prediction for one point, or None with the reason."""
    db = load_db()
    if system_spec:
        resolved = resolve(system_spec, db)
        if resolved.train_fit is not None and resolved.profile is not None:
            return _on_fit(cfg, ranks, precision, resolved.profile.name, resolved.train_fit), ""
        return _on_system(cfg, ranks, precision, resolved), ""
    if probed and probed.get("gpu") not in (None, "CPU"):
        return _on_system(cfg, ranks, precision, ResolvedSystem.plain(system_from_dict(probed, db.gpu))), ""
    return None, NO_CPU_MODEL


def host_memory_gib_per_rank(cfg: TrainConfig, ranks: int, precision: str) -> float:
    """Training memory of one rank by Korthikanti's accounting (weights, gradients, optimizer, activations)."""
    return memory_gib_of_layout(_job(cfg, ranks, precision), cfg.tp, max(ranks // cfg.tp, 1), cfg.recompute,
                                cfg.zero)


def available_host_gib() -> float | None:
    """Memory the host can still give (MemAvailable), GiB; None where unknown."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / GIB
    except OSError:
        pass
    pages = os.sysconf("SC_AVPHYS_PAGES") if hasattr(os, "sysconf") else None
    return pages * os.sysconf("SC_PAGE_SIZE") / GIB if pages else None


def check_fits(cfg: TrainConfig, ranks: int, precision: str, backend: str, prediction: Prediction | None) -> None:
    """Stop before allocating anything when the model cannot fit (UserError with the prediction)."""
    if backend == "nccl" and prediction is not None and not prediction.fits:
        raise UserError(f"{cfg.model.id} does not fit: predicted {prediction.memory_gib_per_gpu:.1f} GiB per GPU, "
                        f"{prediction.memory_gib_available:.1f} GiB usable; scale it down with --layers/--hidden, "
                        "use --fsdp/--zero or --recompute full")
    if backend == "nccl":
        return
    need = host_memory_gib_per_rank(cfg, ranks, precision) * ranks
    have = available_host_gib()
    if have is not None and need > have:
        raise UserError(f"{cfg.model.id} does not fit: predicted {need:.1f} GiB for {ranks} CPU ranks, "
                        f"{have:.1f} GiB available on this host; scale it down with --layers/--hidden/--vocab")
