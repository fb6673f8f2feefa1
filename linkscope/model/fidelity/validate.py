"""`linkscope validate`: the model's error on the evidence set, in-sample, leave-one-source-out and
leave-one-regime-out.

In-sample: every entry predicted with the packaged constants. Leave-one-source-out (LOSO): for each source,
the fitted constants (model/fidelity/fit.py for training and inference, model/fidelity/comm_fit.py for the
collective model's NVLS chunk overhead) are fitted again on every other source and the left-out source's
entries are predicted with them. The LOSO residuals of each kind are also what the prediction ranges
(`*_range`) are made of. Leave-one-regime-out (LORO): the same refit without the entries of one regime
(model/fidelity/regimes.py), whatever their source, predicting that regime.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.comm.moe import moe_constants
from linkscope.model.comm.params import CommFit, comm_fit, comm_fit_override
from linkscope.model.step.compute import (
    ComputeConstants,
    constants_override,
    packaged_constants,
)
from linkscope.model.fidelity.evidence import (
    EMPTY_KINDS,
    KINDS,
    CollectiveEntry,
    DisaggEntry,
    Entry,
    EvidenceSet,
    MemoryEntry,
    MoeEntry,
    TrainingEntry,
    load_evidence,
)
from linkscope.model.fidelity.comm_fit import PricedCollectives
from linkscope.model.fidelity.evidence_predict import evidence_class, measured, predicted
from linkscope.model.fidelity.fit import PricedSet, sources_of
from linkscope.model.fidelity.moe_fit import PricedMoeTraining, moe_training_entries, overhead_override
from linkscope.model.fidelity.regimes import REGIMES

RANGE_QUANTILES = (10.0, 90.0)


@dataclass(frozen=True)
class EntryResult:
    """One entry: what was measured and what the model predicts in-sample and with its source left out."""

    source: str
    kind: str
    label: str
    measured: float
    in_sample: float
    loso: float
    fabric_class: str = ""
    """The class its range evidence counts for (`model.ranges.classes.fabric_class`)."""
    gpu_family: str = ""
    loro: dict[str, float] = field(default_factory=dict)
    """Per regime the entry belongs to, its prediction with that regime left out of the fit."""
    metric: str = ""

    @property
    def in_sample_err_pct(self) -> float:
        """Signed error of the in-sample prediction, percent of the measured value."""
        return (self.in_sample / self.measured - 1.0) * 100.0

    @property
    def loso_err_pct(self) -> float:
        """Signed error of the leave-one-source-out prediction, percent of the measured value."""
        return (self.loso / self.measured - 1.0) * 100.0


@dataclass(frozen=True)
class ErrorSummary:
    """Absolute errors of a group of entries, percent."""

    n: int
    in_sample_median_pct: float
    loso_median_pct: float
    loso_max_pct: float

    @staticmethod
    def of(results: list[EntryResult]) -> ErrorSummary:
        """The summary of `results` (at least one)."""
        in_sample = [abs(r.in_sample_err_pct) for r in results]
        loso = [abs(r.loso_err_pct) for r in results]
        return ErrorSummary(len(results), float(np.median(in_sample)), float(np.median(loso)), float(np.max(loso)))


@dataclass
class Validation:
    """What `linkscope validate --json` prints (entries only on request)."""

    kinds: dict[str, ErrorSummary]
    sources: list[dict[str, Any]]
    regimes: list[dict[str, Any]] = field(default_factory=list)
    entries: list[EntryResult] = field(default_factory=list)
    fitted: dict[str, Any] = field(default_factory=dict)
    empty_kinds: dict[str, str] = field(default_factory=lambda: dict(EMPTY_KINDS))
    """Kinds with no entries yet, and why (listed, never summarised)."""

    def as_dict(self, with_entries: bool = False) -> dict[str, Any]:
        """JSON-ready dict."""
        kinds = {k: {**asdict(v), "loro_median_pct": self.loro_median_pct(k), "coverage_pct": coverage_pct(self, k)}
                 for k, v in self.kinds.items()}
        kinds.get("disaggregated", {}).update(verdicts=verdicts(self))
        kinds.update({k: {"n": 0, "why": why} for k, why in self.empty_kinds.items() if k not in kinds})
        out: dict[str, Any] = {"kinds": kinds, "sources": self.sources, "regimes": self.regimes,
                               "fitted": self.fitted}
        if with_entries:
            out["entries"] = [{**asdict(r), "in_sample_err_pct": r.in_sample_err_pct,
                               "loso_err_pct": r.loso_err_pct,
                               "loro_err_pct": {k: loro_err_pct(r, k) for k in r.loro}} for r in self.entries]
        return out

    def loro_median_pct(self, kind: str) -> float | None:
        """Median absolute LORO error over every (regime, entry) pair of `kind`; None when no regime has one."""
        errs = [abs(loro_err_pct(r, k)) for r in self.entries if r.kind == kind for k in r.loro]
        return float(np.median(errs)) if errs else None


def coverage_pct(validation: Validation, kind: str) -> float | None:
    """Share of the kind's entries (percent) whose measured value lies inside the p10..p90 range the packaged
    ranges (data/accuracy.yaml) give their leave-one-source-out prediction: their class's, or the kind's widest
    where the class has too few entries (`model.ranges.accuracy.spread`'s rule)."""
    from linkscope.model.ranges.accuracy import MIN_CLASS_ENTRIES, accuracy_file

    data = accuracy_file()
    results = [r for r in validation.entries if r.kind == kind]
    if not results or kind not in data.kinds:
        return None
    inside = 0
    for r in results:
        own = data.classes.get(kind, {}).get(r.fabric_class)
        span = own if own is not None and own.n >= MIN_CLASS_ENTRIES else data.widest.get(kind, data.kinds[kind])
        inside += min(span.p10_log, 0.0) <= float(np.log(r.measured / r.loso)) <= max(span.p90_log, 0.0)
    return 100.0 * inside / len(results)


def verdicts(validation: Validation) -> dict[str, int]:
    """Published comparisons of disaggregated against colocated serving (`speedup` entries): how many the model
    calls the same way (disaggregated faster exactly when the source found it faster)."""
    speedups = [r for r in validation.entries if r.kind == "disaggregated" and r.metric == "speedup"]
    right = sum((r.measured > 1.0) == (r.loso > 1.0) for r in speedups)
    return {"n": len(speedups), "right": right}


def loro_err_pct(result: EntryResult, regime: str) -> float:
    """Signed error of the entry's prediction with `regime` left out, percent of the measured value."""
    return (result.loro[regime] / result.measured - 1.0) * 100.0


def kind_of(entry: Entry) -> str:
    """training, collectives, inference, moe, disaggregated or memory."""
    if isinstance(entry, TrainingEntry):
        return "training"
    if isinstance(entry, MemoryEntry):
        return "memory"
    if isinstance(entry, MoeEntry):
        return "moe"
    if isinstance(entry, DisaggEntry):
        return "disaggregated"
    return "collectives" if isinstance(entry, CollectiveEntry) else "inference"


def label_of(entry: Entry) -> str:
    """A short name for one entry."""
    if isinstance(entry, TrainingEntry):
        tune = f" LoRA r{entry.lora_rank}" if entry.lora_rank else ""
        return f"{entry.model}{tune} on {entry.gpus} x {entry.system}"
    if isinstance(entry, CollectiveEntry):
        return f"{entry.op} {entry.size_bytes} B on {entry.gpus} x {entry.system}"
    if isinstance(entry, MemoryEntry):
        return (f"{entry.model} memory tp{entry.tp} pp{entry.pp} v{entry.interleave} cp{entry.cp} dp{entry.dp} "
                f"{entry.seq_len // 1024}K {entry.recompute} ({entry.figure})")
    if isinstance(entry, MoeEntry):
        return f"{entry.kernel} {entry.op} ep {entry.ep} x {entry.tokens_per_rank} tokens on {entry.system}"
    if isinstance(entry, DisaggEntry):
        if entry.metric == "kv_gb_per_s":
            return f"KV {entry.messages} x {entry.message_bytes} B over {entry.path} on {entry.system}"
        return (f"{entry.model} {entry.input_tokens}/{entry.output_tokens} P{entry.prefill_gpus}/tp{entry.prefill_tp} "
                f"D{entry.decode_gpus}/ep{entry.decode_ep} speedup on {entry.system}")
    return f"{entry.model} tp{entry.tp} batch {entry.batch} {entry.metric} on {entry.system}"


def _predict_with(entries: list[Entry], db: HardwareDB, constants: ComputeConstants,
                  comm: CommFit | None = None, moe_overhead_us: tuple[float, float] | None = None) -> list[float]:
    packaged = moe_constants()
    moe_fixed = (packaged.moe_layer_overhead_us, packaged.moe_expert_overhead_us) if moe_overhead_us is None \
        else moe_overhead_us
    with constants_override(constants), comm_fit_override(comm or comm_fit()), overhead_override(moe_fixed):
        return [predicted(e, db) for e in entries]


def fitted_summary(c: ComputeConstants, comm: CommFit | None = None) -> dict[str, Any]:
    """The fitted constants as `validate` reports them."""
    return {"gemm_share": {"ampere:bf16": c.gemm_efficiency_max, **c.gemm_efficiency_by_arch},
            "zero3_overlap": c.zero3_overlap, "tp_comm_overlap": c.tp_comm_overlap,
            "decode_hbm_measured": dict(c.decode_hbm_measured_by_vendor),
            "infer_gemm_share": dict(c.infer_gemm_efficiency_by_arch),
            "decode_kernel_us": c.decode_kernel_us, "decode_seq_host_us": c.decode_seq_host_us,
            "nvls_chunk_overhead_us": (comm or comm_fit()).nvls_chunk_overhead_us,
            "nvls_sync_us": (comm or comm_fit()).nvls_sync_us,
            "nccl_call_host_us": (comm or comm_fit()).nccl_call_host_us,
            "ampere_nvlink_hop_scale": (comm or comm_fit()).ampere_nvlink_hop_scale,
            "ampere_ll_share": (comm or comm_fit()).ampere_ll_share,
            "efa_latency_us_extra": (comm or comm_fit()).efa_latency_us_extra,
            "moe_layer_overhead_us": moe_constants().moe_layer_overhead_us,
            "moe_expert_overhead_us": moe_constants().moe_expert_overhead_us}


def validate(evidence: EvidenceSet, db: HardwareDB, constants: ComputeConstants | None = None,
             comm: CommFit | None = None) -> Validation:
    """In-sample and leave-one-source-out errors of `constants` and `comm` (the packaged ones by default)."""
    constants = constants or packaged_constants()
    comm = comm or comm_fit()
    entries: list[Entry] = [e for kind in KINDS for e in evidence.entries(kind)]
    in_sample = _predict_with(entries, db, constants, comm)
    with comm_fit_override(comm):
        priced = PricedSet(evidence, db, constants)
    with constants_override(constants):
        priced_comm = PricedCollectives(evidence.collectives, db)
    with constants_override(constants), comm_fit_override(comm):
        priced_moe = PricedMoeTraining(moe_training_entries(evidence), db)
    loso = list(in_sample)
    loro: list[dict[str, float]] = [{} for _ in entries]
    for regime in REGIMES:
        idx = [i for i, e in enumerate(entries) if regime.member(e, db)]
        if not idx:
            continue
        if regime.kind == "memory":
            # Nothing is fitted for memory: leaving a regime out changes no prediction.
            for i in idx:
                loro[i][regime.id] = in_sample[i]
            continue
        leave = _leaving_entries({id(entries[i]) for i in idx})
        fold = priced.fit(keep=leave)
        comm_fold = priced_comm.fit(keep=leave) if regime.kind == "collectives" else comm
        for i, value in zip(idx, _predict_with([entries[i] for i in idx], db, fold, comm_fold,
                                               priced_moe.fit(keep=leave))):
            loro[i][regime.id] = value
    for source in sources_of(entries):
        if evidence.sources[source].kind == "memory":
            # The memory model has no fitted constant: a memory source's LOSO prediction is its in-sample one.
            continue
        idx = [i for i, e in enumerate(entries) if e.source == source]
        fold = priced.fit(keep=_leaving_out(source))
        comm_fold = priced_comm.fit(keep=_leaving_out(source)) if evidence.sources[source].kind == "collectives" \
            else comm
        for i, value in zip(idx, _predict_with([entries[i] for i in idx], db, fold, comm_fold,
                                               priced_moe.fit(keep=_leaving_out(source)))):
            loso[i] = value
    results = [EntryResult(e.source, kind_of(e), label_of(e), measured(e), p, q, *evidence_class(e, db), loro=r,
                           metric=getattr(e, "metric", ""))
               for e, p, q, r in zip(entries, in_sample, loso, loro)]
    return _summarise(results, evidence, constants, comm)


@functools.cache
def packaged_validation() -> Validation:
    """`validate` of the packaged constants on the packaged evidence and hardware, once per process: every
    input is a packaged file, so the answer cannot change while the process runs."""
    return validate(load_evidence(), load_db(include_user=False))


def _leaving_out(source: str) -> Callable[[Entry], bool]:
    """A filter that keeps every entry but those of `source`."""
    return lambda entry: entry.source != source


def _leaving_entries(left_out: set[int]) -> Callable[[Entry], bool]:
    """A filter that keeps every entry but those whose id() is in `left_out` (a regime's, decided once: some
    memberships need a prediction)."""
    return lambda entry: id(entry) not in left_out


def _summarise(results: list[EntryResult], evidence: EvidenceSet, constants: ComputeConstants,
               comm: CommFit) -> Validation:
    kinds = {k: ErrorSummary.of(rs) for k in KINDS if (rs := [r for r in results if r.kind == k])}
    sources = []
    for source in sources_of(results):
        rs = [r for r in results if r.source == source]
        sources.append({"source": source, "kind": rs[0].kind, "citation": evidence.sources[source].citation,
                        **asdict(ErrorSummary.of(rs))})
    regimes = []
    for regime in REGIMES:
        rs = [r for r in results if regime.id in r.loro]
        if rs:
            loro = [abs(loro_err_pct(r, regime.id)) for r in rs]
            regimes.append({"regime": regime.id, "kind": regime.kind, "description": regime.description,
                            "n": len(rs), "sources": len({r.source for r in rs}),
                            "in_sample_median_pct": float(np.median([abs(r.in_sample_err_pct) for r in rs])),
                            "loso_median_pct": float(np.median([abs(r.loso_err_pct) for r in rs])),
                            "loro_median_pct": float(np.median(loro)), "loro_max_pct": float(np.max(loro))})
    return Validation(kinds=kinds, sources=sources, regimes=regimes, entries=results,
                      fitted=fitted_summary(constants, comm))


def _quantiles(logs: list[float]) -> dict[str, Any]:
    lo, hi = np.percentile(logs, RANGE_QUANTILES)
    return {"n": len(logs), "p10_log": round(float(lo), 4), "p90_log": round(float(hi), 4)}


def range_quantiles(validation: Validation) -> dict[str, dict[str, Any]]:
    """Per kind, the p10 and p90 of log(measured / LOSO prediction): a prediction x spans
    x * exp(p10) .. x * exp(p90) for times (the inverse for rates)."""
    out = {}
    for kind in KINDS:
        logs = [float(np.log(r.measured / r.loso)) for r in validation.entries if r.kind == kind]
        if logs:
            out[kind] = _quantiles(logs)
    return out


def range_file(validation: Validation) -> dict[str, Any]:
    """What data/accuracy.yaml holds besides its source: per kind the pooled p10/p90 (`kinds`), the widest
    spread (smallest and largest residual), p10/p90 per fabric class and size regime, and the GPU families with
    evidence."""
    out: dict[str, Any] = {"kinds": range_quantiles(validation), "widest": {}, "classes": {}, "families": {}}
    for kind in out["kinds"]:
        results = [r for r in validation.entries if r.kind == kind]
        logs = [float(np.log(r.measured / r.loso)) for r in results]
        out["widest"][kind] = {"n": len(logs), "p10_log": round(min(logs), 4), "p90_log": round(max(logs), 4)}
        classes = sorted({r.fabric_class for r in results})
        out["classes"][kind] = {c: _quantiles([float(np.log(r.measured / r.loso)) for r in results
                                               if r.fabric_class == c]) for c in classes}
        out["families"][kind] = sorted({r.gpu_family for r in results})
    return out
