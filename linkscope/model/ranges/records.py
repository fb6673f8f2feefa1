"""The best recorded run per GPU family and number format, derived from the evidence set when it is loaded.

A prediction whose MFU (training) or serving MFU is above every run the evidence set records on the same GPU
family in the same format is flagged: the model may be right, but nothing measured backs it. The records are
computed from each entry's own configuration through the one MFU owner (model/step/mfu.py), never written down,
so an entry added to data/evidence.yaml or data/evidence/*.yaml moves them.

Serving MFU is output tokens/s per GPU x 2 x the weights a token's matmuls use, over the same dense peak: one
figure that compares serving throughput across model sizes (prompt tokens are not counted, on both sides).
Prefill-only entries (`prefill_s`) record no serving throughput.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from pathlib import Path

from linkscope.hardware import built_cache
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import packaged_files
from linkscope.hardware.specs import GpuSpec
from linkscope.model.fidelity.evidence import EVIDENCE_DIR, EVIDENCE_FILE, InferenceEntry, TrainingEntry
from linkscope.model.step.mfu import MfuPeak, mfu_peak
from linkscope.model.step.transformer import PRESETS_FILE, ModelConfig


RecordKind = Literal["training", "serving"]

FLAG_MARGIN = 1.0
"""A prediction is flagged when its MFU is above the best record times this (exactly above, no slack)."""


@dataclass(frozen=True)
class Record:
    """One evidence entry's measured MFU, with what it was."""

    kind: RecordKind
    family: str
    precision: str
    mfu: float
    source: str
    what: str
    """`llama3-70b on 64 GPUs (dgx-h100)`."""


def serving_tflops_per_gpu(model: ModelConfig, output_tokens_per_s_per_gpu: float) -> float:
    """Model TFLOP/s per GPU of serving: each output token runs 2 FLOPs per weight its matmuls use."""
    return output_tokens_per_s_per_gpu * 2.0 * model.active_params() / 1e12


def _training_record(entry: TrainingEntry, gpu: GpuSpec, model: ModelConfig) -> Record:
    from linkscope.model.step.peft import training_flops_per_token

    peak = mfu_peak(gpu, entry.precision)
    tokens_per_s_per_gpu = entry.global_batch * entry.seq_len / entry.step_time_s / entry.gpus
    tflops = training_flops_per_token(model, entry.peft, entry.seq_len) * tokens_per_s_per_gpu / 1e12
    return Record("training", peak.family, peak.precision, float(peak.mfu(tflops)), entry.source,
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
    peak = mfu_peak(gpu, entry.precision)
    return Record("serving", peak.family, peak.precision, float(peak.mfu(serving_tflops_per_gpu(model, rate))),
                  entry.source, f"{entry.model}, TP {entry.tp}, batch {entry.batch or 'max'} ({entry.system})")


EVIDENCE_SYSTEMS_DIR = EVIDENCE_FILE.parent / "evidence_systems"
"""evidence_predict.EVIDENCE_SYSTEMS, named here so that a cached answer needs none of the prediction code."""


def _inputs() -> tuple[list[Path], list[Path]]:
    """What the records are built from: the data files (by their texts), and the code and offering files (by
    their stamps), as `built_cache.cached` takes them."""
    files = [EVIDENCE_FILE, *sorted(EVIDENCE_DIR.glob("*.yaml")), *sorted(EVIDENCE_SYSTEMS_DIR.glob("*.yaml")),
             PRESETS_FILE, *packaged_files()]
    model = Path(__file__).parents[1]
    code = [Path(__file__), *(model / "step" / f for f in ("mfu.py", "transformer.py", "peft.py")),
            *(model / "fidelity" / f for f in ("evidence.py", "evidence_predict.py")),
            model / "calibration" / "calibration_set.py",
            *(model.parent / "hardware" / f for f in ("specs.py", "resolve.py"))]
    return files, code


@functools.cache
def best_records() -> dict[tuple[str, str, str], Record]:
    """The best record per (kind, GPU family, format) over the packaged evidence set, kept between starts
    (rebuilt whenever an evidence, system or model file changes). Entries whose System, model or GPU format
    cannot be resolved are left out here (`linkscope validate` reports them)."""
    files, code = _inputs()
    return built_cache.cached("records", files, code, _built_records)


def _built_records() -> dict[tuple[str, str, str], Record]:
    # Imported here: the evidence set's predictions import the step models, which import this module.
    from linkscope.hardware.errors import DataError
    from linkscope.hardware.loader import load_db
    from linkscope.model.fidelity.evidence import load_evidence
    from linkscope.model.fidelity.evidence_predict import evidence_system
    from linkscope.model.step.transformer import model_presets

    db, models, evidence = load_db(include_user=False), model_presets(), load_evidence()
    records: list[Record] = []
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
        if record is not None and record.mfu > 0:
            records.append(record)
    best: dict[tuple[str, str, str], Record] = {}
    for r in records:
        key = (r.kind, r.family, r.precision)
        if key not in best or r.mfu > best[key].mfu:
            best[key] = r
    return best


def best_record(kind: RecordKind, peak: MfuPeak) -> Record | None:
    """The best recorded run of `kind` on the peak's GPU family in the peak's format, or None."""
    return best_records().get((kind, peak.family, peak.precision))


def above_record_flag(kind: RecordKind, mfu: float, peak: MfuPeak) -> str | None:
    """`above every recorded A100 BF16 run: 58% MFU (best recorded 55%, llm-foundry-benchmarks: ...)`, or None
    where the MFU is within the records or no record exists."""
    record = best_record(kind, peak)
    if record is None or mfu <= record.mfu * FLAG_MARGIN:
        return None
    what = "run" if kind == "training" else "serving run"
    return (f"above every recorded {peak.family} {peak.precision_name} {what}: {mfu:.0%} MFU of {peak.label} "
            f"(best recorded {record.mfu:.0%}, {record.source}: {record.what})")
