"""The best recorded run per GPU family and number format, computed from the evidence set (what
data/records.yaml holds; model/ranges/records.py reads it and flags predictions above it).

Each record is one evidence entry's measured MFU, from its own configuration through the one MFU owner
(model/ranges/mfu.py): training from its tokens/s per GPU, serving from its output tokens/s per GPU (serving
MFU, step/infer.py serving_tflops_per_gpu). Prefill-only entries record no serving throughput; entries whose
System, model or GPU format cannot be resolved are left out (`linkscope validate` reports them).
"""

from __future__ import annotations

from typing import Any

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.specs import GpuSpec
from linkscope.model.fidelity.evidence import InferenceEntry, TrainingEntry, load_evidence
from linkscope.model.fidelity.evidence_predict import evidence_system
from linkscope.model.ranges.mfu import MfuPeak, mfu_peak
from linkscope.model.ranges.records import Record, RecordKind
from linkscope.model.step.infer import serving_tflops_per_gpu
from linkscope.model.step.peft import training_flops_per_token
from linkscope.model.step.transformer import ModelConfig, model_presets


def _record(kind: RecordKind, peak: MfuPeak, tflops: float, source: str, what: str) -> Record | None:
    """A record where the MFU is a physical one (a measured MFU of 100% or more is a bad entry, not a record)."""
    mfu = float(peak.mfu(tflops))
    if not 0 < mfu < 1:
        return None
    return Record(kind=kind, family=peak.family, precision=peak.precision, mfu=mfu, source=source, what=what)


def _training_record(entry: TrainingEntry, gpu: GpuSpec, model: ModelConfig) -> Record | None:
    tokens_per_s_per_gpu = entry.global_batch * entry.seq_len / entry.step_time_s / entry.gpus
    tflops = training_flops_per_token(model, entry.peft, entry.seq_len) * tokens_per_s_per_gpu / 1e12
    return _record("training", mfu_peak(gpu, entry.precision), tflops, entry.source,
                   f"{entry.model} on {entry.gpus} GPUs ({entry.system})")


def _serving_tokens_per_s_per_gpu(entry: InferenceEntry) -> float | None:
    """Output tokens/s per GPU the entry measured, from whichever metric it has; None for a prefill alone."""
    gpus = entry.tp * entry.pp
    if entry.metric == "output_tokens_per_s":
        return entry.value / gpus
    if entry.batch is None:
        return None
    if entry.metric == "batch_latency_s":
        return entry.batch * entry.output_tokens / entry.value / gpus
    if entry.metric == "time_per_output_token_s":
        return entry.batch / entry.value / gpus
    return None


def _serving_record(entry: InferenceEntry, gpu: GpuSpec, model: ModelConfig) -> Record | None:
    rate = _serving_tokens_per_s_per_gpu(entry)
    if rate is None:
        return None
    return _record("serving", mfu_peak(gpu, entry.precision), serving_tflops_per_gpu(model, rate), entry.source,
                   f"{entry.model}, TP {entry.tp}, batch {entry.batch or 'max'} ({entry.system})")


def computed_records() -> list[Record]:
    """The best record per (kind, GPU family, format) over the packaged evidence set, sorted by that key."""
    db, models, evidence = load_db(include_user=False), model_presets(), load_evidence()
    best: dict[tuple[str, str, str], Record] = {}
    entries: list[TrainingEntry | InferenceEntry] = [*evidence.training, *evidence.inference]
    for entry in entries:
        model = models.get(entry.model)
        if model is None:
            continue
        try:
            gpu = evidence_system(entry.system, db).node.gpu
            record = (_training_record(entry, gpu, model) if isinstance(entry, TrainingEntry)
                      else _serving_record(entry, gpu, model))
        except (UserError, DataError, ValueError):
            continue
        if record is None:
            continue
        key = (record.kind, record.family, record.precision)
        if key not in best or record.mfu > best[key].mfu:
            best[key] = record
    return [best[k] for k in sorted(best)]


def records_document() -> dict[str, Any]:
    """data/records.yaml's content (without its header comments and date)."""
    return {"records": [r.model_dump() for r in computed_records()]}
