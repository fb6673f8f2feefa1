"""`advise tune`: which data-parallel knobs pay on this System for this job, ranked by predicted step time.

Each candidate (gradient compression, bucket size, ZeRO++ and their combinations, model/step/knobs.py) is the
same job predicted with its own best layout (the knobs constrain the ZeRO stage and framework); the baseline is
the job without knobs. Each carries the step time's range (the training kind's leave-one-source-out errors,
model/ranges/accuracy.py), its speedup over the baseline, what it costs and saves, and the exact `linkscope bench
train` command that measures it where bench train can run it (DDP hooks and buckets; DeepSpeed's 1-bit Adam and
ZeRO++ are not in bench train, and the answer says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.hardware.errors import UserError
from linkscope.model.ranges.accuracy import spread, time_range
from linkscope.model.step.job import Job
from linkscope.model.step.knobs import Knobs, model_gradient_mb
from linkscope.model.step.memory import gradient_bytes
from linkscope.model.step.predict import SystemInForce, TrainPrediction, predict_train
from linkscope.model.step.search import LayoutRequest

POWERSGD_RANKS = (1, 4, 16)
BUCKETS_MB = (5.0, 25.0, 100.0)
ZEROPP_SETS = (("qw",), ("qg",), ("hp",), ("qw", "qg", "hp"))


def candidate_knobs(job: Job) -> list[Knobs]:
    """The knobs and combinations `advise tune` tries: each compression alone (PowerSGD at a few ranks), each
    bucket size alone, the 16-bit compressions with each bucket, and ZeRO++'s options alone and together."""
    most_mb = model_gradient_mb(job.model, gradient_bytes(job))
    buckets = [b for b in BUCKETS_MB if b <= most_mb]
    out = [Knobs("fp16"), Knobs("bf16"), *(Knobs("powersgd", r) for r in POWERSGD_RANKS), Knobs("onebit")]
    out += [Knobs(bucket_mb=b) for b in buckets]
    out += [Knobs(c, bucket_mb=b) for c in ("bf16",) for b in buckets]
    out += [Knobs("powersgd", 4, bucket_mb=b) for b in buckets]
    out += [Knobs(zeropp=frozenset(s)) for s in ZEROPP_SETS]
    return out


def bench_command(model: str, knobs: Knobs, system_label: str, gpus: int,
                  layout: dict[str, Any] | None = None) -> tuple[str | None, str]:
    """The `linkscope bench train` command that measures `knobs`, and what it measures when that differs from the
    ranked layout (None for DeepSpeed's knobs). bench train runs PyTorch's DDP hooks and buckets (ZeRO-0, tensor
    parallelism allowed, no pipeline): a layout it cannot run is measured under plain DDP on the same GPUs, and the
    prediction it prints beside the measurement is for that layout."""
    layout = layout or {}
    if knobs.zeropp or knobs.compression == "onebit":
        return None, "DeepSpeed's; bench train runs PyTorch DDP/FSDP only"
    parts = ["linkscope bench train", f"-m {model}", f"-s {system_label}", f"--nproc {gpus}"]
    pipelined, sharded = int(layout.get("pp", 1)) > 1, int(layout.get("zero", 0)) > 0
    note = ""
    if pipelined or (sharded and knobs.active):
        note = ("measures the knob under plain DDP on the same GPUs (bench train has no pipeline, and its hooks "
                "and buckets are DDP's); the prediction beside it is for that layout")
    else:
        if int(layout.get("tp", 1)) > 1:
            parts.append(f"--tp {layout['tp']}")
        if sharded:
            parts.append(f"--zero {layout['zero']}")
    if knobs.compression != "none":
        parts.append(f"--comm-hook {knobs.compression_label}")
    if knobs.bucket_mb is not None:
        parts.append(f"--bucket-mb {knobs.bucket_mb:g}")
    return " ".join(parts), note


@dataclass(frozen=True)
class TuneOption:
    """One candidate's answer."""

    label: str
    knobs: dict[str, Any]
    step_time_s: float
    step_time_s_range: list[float]
    speedup: float
    """Baseline step time over this one (above 1: the knobs help)."""
    fits: bool
    memory_gib_per_gpu: float
    dp_comm_exposed_s: float
    knob_compute_s: float
    layout: dict[str, Any]
    framework: str
    optimisation: str = ""
    bench_command: str | None = None
    measure_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dict(self.__dict__)


@dataclass
class TuneAdvice:
    """What `advise tune --json` prints."""

    system: str
    model: str
    gpus: int
    global_batch: int
    seq_len: int
    baseline: TuneOption
    options: list[TuneOption]
    """Ranked: fitting first, then by predicted step time."""
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Candidates the job cannot run, with the reason."""
    range_basis: str = ""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.__dict__, "baseline": self.baseline.as_dict(), "options": [o.as_dict() for o in self.options]}


def _option(prediction: TrainPrediction, knobs: Knobs, baseline_s: float, model_arg: str, system_label: str,
            resolved: SystemInForce) -> TuneOption:
    effect = prediction.knobs or {}
    command, why = bench_command(model_arg, knobs, system_label, prediction.gpus, prediction.parallelism.as_dict())
    return TuneOption(
        label=knobs.label(), knobs=knobs.as_dict(), step_time_s=prediction.step_time_s,
        step_time_s_range=list(time_range(prediction.step_time_s, "training", resolved.system)),
        speedup=baseline_s / prediction.step_time_s if prediction.step_time_s > 0 else 0.0, fits=prediction.fits,
        memory_gib_per_gpu=prediction.memory_gib_per_gpu,
        dp_comm_exposed_s=prediction.breakdown["dp_comm_exposed_s"],
        knob_compute_s=prediction.breakdown.get("knob_compute_s", 0.0),
        layout=prediction.parallelism.as_dict(), framework=prediction.framework,
        optimisation=str(effect.get("optimisation", "")), bench_command=command,
        measure_note=why)


def advise_tune(job: Job, resolved: SystemInForce, req: LayoutRequest, model_arg: str, system_label: str,
                candidates: list[Knobs] | None = None) -> TuneAdvice:
    """Every candidate knob set predicted on the resolved System (each with its best layout under `req`), ranked
    by step time, the baseline beside them."""
    system = resolved.system
    with resolved.computing():
        base = predict_train(replace(job, knobs=Knobs()), system, req, resolved.tiers)
        baseline = _option(base, Knobs(), base.step_time_s, model_arg, system_label, resolved)
        options, skipped = [], []
        for knobs in candidates if candidates is not None else candidate_knobs(job):
            try:
                prediction = predict_train(replace(job, knobs=knobs), system, req, resolved.tiers)
            except UserError as exc:
                skipped.append({"label": knobs.label(), "reason": exc.for_flags()})
                continue
            options.append(_option(prediction, knobs, base.step_time_s, model_arg, system_label, resolved))
    options.sort(key=lambda o: (not o.fits, o.step_time_s))
    notes = list(resolved.training_notes)
    if base.breakdown["dp_comm_exposed_s"] < 0.01 * base.step_time_s:
        exposed = base.breakdown["dp_comm_exposed_s"]
        notes.append(f"the baseline's layout already hides data-parallel traffic ({exposed:.3g} s exposed of "
                     f"{base.step_time_s:.3g} s): the knobs can buy little here; pin your own layout "
                     f"(--dp, --tp, --pp, --zero) to see what they buy on it")
    notes.append("the bench train commands build the named model under DDP, a full replica per GPU: add --layers N "
                 "where it does not fit; the prediction printed beside the measurement follows the model measured")
    notes.append("compression changes the optimisation (PowerSGD's rank, 1-bit Adam's warm-up, FP16/BF16 sums); "
                 "linkscope predicts time only, not convergence")
    return TuneAdvice(system=system.id, model=job.model.id, gpus=base.gpus, global_batch=job.global_batch,
                      seq_len=job.seq_len, baseline=baseline, options=options, skipped=skipped,
                      range_basis=spread("training", system).basis, notes=notes)
