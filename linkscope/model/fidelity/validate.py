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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

import linkscope
from linkscope.hardware import built_cache
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
    kind_of,
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
from linkscope.model.fidelity.evidence_predict import evidence_class, evidence_features, measured, predicted
from linkscope.model.fidelity.fit import PricedSet, sources_of
from linkscope.model.fidelity.moe_fit import PricedMoeTraining, moe_training_entries, overhead_override
from linkscope.model.fidelity.regimes import REGIMES
from linkscope.model.ranges.rule import Query, Residual, spread_of

RATE_METRICS = frozenset({"busbw_gb_per_s", "gb_per_s", "kv_gb_per_s", "output_tokens_per_s", "speedup"})
"""Metrics of collectives, serving, MoE and disaggregated entries that are rates. Training entries are compared as
step times whatever metric their source printed (`evidence_predict.measured`)."""
WORST_REGIMES = 3
_PACKAGE_ROOT = Path(linkscope.__file__).parent


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
    precision: str | None = None
    mode: str | None = None
    framework: str | None = None
    gpus: int | None = None
    moe: bool | None = None
    """Training: the model routes tokens to experts."""
    range_p10_log: float | None = None
    range_p90_log: float | None = None
    """The p10..p90 (log of a time over its prediction) the range rule gives the entry's LOSO prediction from
    every other source's records: the range a user would have had without this entry's source (`nested`)."""
    range_note: str | None = None

    @property
    def is_rate(self) -> bool:
        """The entry's metric grows as time shrinks (a bandwidth, tokens/s, a speedup)."""
        return self.kind != "training" and self.metric in RATE_METRICS

    @property
    def time_log_residual(self) -> float:
        """log(measured / LOSO prediction) of a time: a rate's sign turned, so that + means too fast."""
        value = float(np.log(self.measured / self.loso))
        return -value if self.is_rate else value

    def time_loro_residuals(self) -> tuple[float, ...]:
        """The same for each regime's leave-one-regime-out prediction."""
        sign = -1.0 if self.is_rate else 1.0
        return tuple(sign * float(np.log(self.measured / v)) for v in self.loro.values())

    @property
    def covered(self) -> bool | None:
        """Whether the measured value lies inside the nested p10..p90 range (None before it is computed)."""
        if self.range_p10_log is None or self.range_p90_log is None:
            return None
        return self.range_p10_log <= self.time_log_residual <= self.range_p90_log

    @property
    def half_width_pct(self) -> float | None:
        """Half the nested p10..p90 width, percent of the central value, in the entry's own metric."""
        if self.range_p10_log is None or self.range_p90_log is None:
            return None
        lo, hi = self.range_p10_log, self.range_p90_log
        return float((np.exp(-lo) - np.exp(-hi)) * 50.0 if self.is_rate else (np.exp(hi) - np.exp(lo)) * 50.0)

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
        kinds = {k: {**asdict(v), "loro_median_pct": self.loro_median_pct(k), "coverage_pct": coverage_pct(self, k),
                     "half_width_pct": half_width_pct(self, k)}
                 for k, v in self.kinds.items()}
        kinds.get("disaggregated", {}).update(verdicts=verdicts(self))
        kinds.update({k: {"n": 0, "why": why} for k, why in self.empty_kinds.items() if k not in kinds})
        out: dict[str, Any] = {"kinds": kinds, "sources": self.sources, "regimes": self.regimes,
                               "worst_regimes": worst_regimes(self), "fitted": self.fitted}
        if with_entries:
            out["entries"] = [{**asdict(r), "in_sample_err_pct": r.in_sample_err_pct,
                               "loso_err_pct": r.loso_err_pct, "covered": r.covered,
                               "half_width_pct": r.half_width_pct,
                               "loro_err_pct": {k: loro_err_pct(r, k) for k in r.loro}} for r in self.entries]
        return out

    def loro_median_pct(self, kind: str) -> float | None:
        """Median absolute LORO error over every (regime, entry) pair of `kind`; None when no regime has one."""
        errs = [abs(loro_err_pct(r, k)) for r in self.entries if r.kind == kind for k in r.loro]
        return float(np.median(errs)) if errs else None

    def selected(self, kind: str | None = None, source: str | None = None) -> Validation:
        """The same results restricted to the entries of `kind` and/or `source` (their ranges and coverage stay
        those computed with every other source's records); possibly empty."""
        keep = [r for r in self.entries if (kind is None or r.kind == kind) and (source is None or r.source == source)]
        kinds = {k: ErrorSummary.of(rs) for k in KINDS if (rs := [r for r in keep if r.kind == k])}
        ids = {r.source for r in keep}
        # A kind with no entries yet is listed only where the filter asks for it (no source holds it).
        empty = {k: why for k, why in self.empty_kinds.items() if source is None and kind in (None, k)}
        return Validation(kinds=kinds, sources=[s for s in self.sources if s["source"] in ids],
                          regimes=_regime_rows(keep), entries=keep, fitted=self.fitted, empty_kinds=empty)


def _covered(results: list[EntryResult]) -> tuple[float | None, float | None]:
    flags = [c for r in results if (c := r.covered) is not None]
    widths = [w for r in results if (w := r.half_width_pct) is not None]
    if not flags:
        return None, None
    return 100.0 * sum(flags) / len(flags), float(np.median(widths))


def coverage_pct(validation: Validation, kind: str, regime: str | None = None) -> float | None:
    """Share of the kind's entries (of `regime`'s, if given), percent, whose measured value lies inside the
    p10..p90 range the range rule (model/ranges/rule.py) gives their leave-one-source-out prediction from every
    other source's records: the range a user would have been given had that source not been in the repository."""
    return _covered(_members(validation, kind, regime))[0]


def half_width_pct(validation: Validation, kind: str, regime: str | None = None) -> float | None:
    """Median half-width of those same ranges, percent of the central value."""
    return _covered(_members(validation, kind, regime))[1]


def _members(validation: Validation, kind: str, regime: str | None) -> list[EntryResult]:
    return [r for r in validation.entries if r.kind == kind and (regime is None or regime in r.loro)]


def worst_regimes(validation: Validation, count: int = WORST_REGIMES) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per kind with regimes, the `count` regimes with the largest leave-one-regime-out median error and the
    `count` with the least coverage: where the next fix of the model (or of its evidence) should look."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for kind in validation.kinds:
        rows = [r for r in validation.regimes if r["kind"] == kind]
        if not rows:
            continue
        by_error = sorted(rows, key=lambda r: -r["loro_median_pct"])[:count]
        by_cover = sorted((r for r in rows if r.get("coverage_pct") is not None),
                          key=lambda r: (r["coverage_pct"], -r["loro_median_pct"]))[:count]
        out[kind] = {"largest_error": [{"regime": r["regime"], "loro_median_pct": r["loro_median_pct"]}
                                       for r in by_error],
                     "least_coverage": [{"regime": r["regime"], "coverage_pct": r["coverage_pct"],
                                         "half_width_pct": r["half_width_pct"]} for r in by_cover]}
    return out


def verdicts(validation: Validation) -> dict[str, int]:
    """Published comparisons of disaggregated against colocated serving (`speedup` entries): how many the model
    calls the same way (disaggregated faster exactly when the source found it faster)."""
    speedups = [r for r in validation.entries if r.kind == "disaggregated" and r.metric == "speedup"]
    right = sum((r.measured > 1.0) == (r.loso > 1.0) for r in speedups)
    return {"n": len(speedups), "right": right}


def loro_err_pct(result: EntryResult, regime: str) -> float:
    """Signed error of the entry's prediction with `regime` left out, percent of the measured value."""
    return (result.loro[regime] / result.measured - 1.0) * 100.0


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
            "reserved_over_allocated": c.reserved_over_allocated,
            "nvls_chunk_overhead_us": (comm or comm_fit()).nvls_chunk_overhead_us,
            "nvls_sync_us": (comm or comm_fit()).nvls_sync_us,
            "nccl_call_host_us": (comm or comm_fit()).nccl_call_host_us,
            "ampere_nvlink_hop_scale": (comm or comm_fit()).ampere_nvlink_hop_scale,
            "ampere_ll_share": (comm or comm_fit()).ampere_ll_share,
            "efa_latency_us_extra": (comm or comm_fit()).efa_latency_us_extra,
            "moe_layer_overhead_us": moe_constants().moe_layer_overhead_us,
            "moe_expert_overhead_us": moe_constants().moe_expert_overhead_us}


def validate(evidence: EvidenceSet, db: HardwareDB, constants: ComputeConstants | None = None,
             comm: CommFit | None = None, priced_comm: PricedCollectives | None = None) -> Validation:
    """In-sample and leave-one-source-out errors of `constants` and `comm` (the packaged ones by default).
    `priced_comm`: `evidence`'s collectives already priced under `constants` (the costliest step), else priced
    here."""
    constants = constants or packaged_constants()
    comm = comm or comm_fit()
    entries: list[Entry] = [e for kind in KINDS for e in evidence.entries(kind)]
    in_sample = _predict_with(entries, db, constants, comm)
    with comm_fit_override(comm):
        priced = PricedSet(evidence, db, constants)
    if priced_comm is None:
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
        leave = _leaving_entries({id(entries[i]) for i in idx})
        fold = priced.fit(keep=leave)
        comm_fold = priced_comm.fit(keep=leave) if regime.kind == "collectives" else comm
        for i, value in zip(idx, _predict_with([entries[i] for i in idx], db, fold, comm_fold,
                                               priced_moe.fit(keep=leave))):
            loro[i][regime.id] = value
    for source in sources_of(entries):
        idx = [i for i, e in enumerate(entries) if e.source == source]
        fold = priced.fit(keep=_leaving_out(source))
        comm_fold = priced_comm.fit(keep=_leaving_out(source)) if evidence.sources[source].kind == "collectives" \
            else comm
        for i, value in zip(idx, _predict_with([entries[i] for i in idx], db, fold, comm_fold,
                                               priced_moe.fit(keep=_leaving_out(source)))):
            loso[i] = value
    results = [EntryResult(e.source, kind_of(e), label_of(e), measured(e), p, q, *evidence_class(e, db), loro=r,
                           metric=getattr(e, "metric", ""), precision=f[0], mode=f[1], framework=f[2], gpus=f[3],
                           moe=f[4])
               for e, p, q, r, f in zip(entries, in_sample, loso, loro, map(evidence_features, entries))]
    results = with_nested_ranges(results)
    return _summarise(results, evidence, constants, comm)


@functools.cache
def packaged_validation() -> Validation:
    """`validate` of the packaged constants on the packaged evidence and hardware, once per process and kept
    between starts: every input is a packaged file or linkscope's own code, so the answer changes only when one
    of them does (`stored_validation`)."""
    return stored_validation(
        lambda: validate(load_evidence(), load_db(include_user=False), priced_comm=packaged_priced_collectives()))


def stored_validation(build: Callable[[], Validation]) -> Validation:
    """`build()`, or what it returned before (`hardware.built_cache`) under the same packaged data files (by
    their texts) and the same linkscope source files: a minute of pricing becomes a file read."""
    files, sources = validation_inputs()
    return built_cache.cached("validation", files, sources, build)


def validation_inputs() -> tuple[list[Path], list[Path]]:
    """(every packaged data file, every linkscope source file): what the packaged validation depends on."""
    return sorted(_PACKAGE_ROOT.rglob("*.yaml")), sorted(_PACKAGE_ROOT.rglob("*.py"))


@functools.cache
def packaged_priced_collectives() -> PricedCollectives:
    """The packaged collective entries priced on the packaged hardware and constants, once per process (what
    `validate` and the collective fit's checks start from)."""
    return PricedCollectives(load_evidence().collectives, load_db(include_user=False))


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
    return Validation(kinds=kinds, sources=sources, regimes=_regime_rows(results), entries=results,
                      fitted=fitted_summary(constants, comm))


def _regime_rows(results: list[EntryResult]) -> list[dict[str, Any]]:
    """Per regime with entries among `results`: its errors, and the coverage and half-width of its entries'
    nested ranges."""
    regimes = []
    for regime in REGIMES:
        rs = [r for r in results if regime.id in r.loro]
        if rs:
            loro = [abs(loro_err_pct(r, regime.id)) for r in rs]
            cover, width = _covered(rs)
            regimes.append({"regime": regime.id, "kind": regime.kind, "description": regime.description,
                            "n": len(rs), "sources": len({r.source for r in rs}),
                            "in_sample_median_pct": float(np.median([abs(r.in_sample_err_pct) for r in rs])),
                            "loso_median_pct": float(np.median([abs(r.loso_err_pct) for r in rs])),
                            "loro_median_pct": float(np.median(loro)), "loro_max_pct": float(np.max(loro)),
                            "coverage_pct": cover, "half_width_pct": width})
    return regimes


def residual_of(result: EntryResult) -> Residual:
    """The entry as a record of the range rule: its class and its time-oriented out-of-sample errors."""
    query = Query(result.kind, result.fabric_class or None, result.gpu_family or None, result.precision,
                  result.mode, result.framework, result.gpus, result.moe)
    return Residual(result.source, query, result.time_log_residual, result.time_loro_residuals())


def with_nested_ranges(results: list[EntryResult]) -> list[EntryResult]:
    """Each entry with the range the rule gives its query from the records of every other source: what a user
    asking about that entry's configuration would have been told had its source not been in the repository."""
    records = [residual_of(r) for r in results]
    out = []
    for result, record in zip(results, records):
        others = [x for x in records if x.source != result.source]
        sp = spread_of(record.query, others)
        out.append(replace(result, range_p10_log=sp.p10_log, range_p90_log=sp.p90_log, range_note=sp.note))
    return out


def _rounded(value: float) -> float:
    return round(float(value), 4)


def range_file(validation: Validation) -> dict[str, Any]:
    """What data/accuracy.yaml holds besides its source and date: per kind, one record per evidence entry with
    its class (the features left out where the entry has none) and its time-oriented LOSO and LORO errors."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in validation.entries:
        record = residual_of(r)
        q = record.query
        row: dict[str, Any] = {"source": r.source, "class": q.fabric_class, "family": q.gpu_family,
                               "precision": q.precision, "mode": q.mode, "framework": q.framework, "gpus": q.gpus,
                               "moe": q.moe}
        row = {k: v for k, v in row.items() if v is not None}
        row["loso"] = _rounded(record.loso_log)
        if record.loro_logs:
            row["loro"] = [_rounded(x) for x in record.loro_logs]
        out.setdefault(r.kind, []).append(row)
    return {"residuals": out}
