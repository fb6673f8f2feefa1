"""The range rule: which out-of-sample residuals a prediction's p10..p90 is made of, how wide it is, and what it
says where the evidence is thin.

Pure functions over residual records (`Residual`: one evidence entry's features and its leave-one-source-out and
leave-one-regime-out errors), so that `validate` applies to a source's entries, with that source's records taken
out, exactly the rule a prediction applies to the packaged records: the coverage it reports is the coverage a user
would have had (docs/model.md, "How ranges are made").

1. The pool is the kind's records. A query far from all of them (a GPU family, a precision, a full-training or
   LoRA mode or a framework the kind has no entry of; more than FAR_GPUS_FACTOR x the largest recorded run) gets a
   range of at least +-FAR_MIN_SHARE and a note saying why.
2. Its class is the records of its architecture (a training query's: dense or mixture of experts, where that
   architecture has enough records) and fabric class (`classes.fabric_class`), narrowed to its GPU family and
   precision where that narrower class has MIN_CLASS_ENTRIES from MIN_CLASS_SOURCES sources. A fabric class with
   fewer than MIN_CLASS_ENTRIES borrows its siblings' (the same scale-up kind and size regime over other fabrics)
   and is widened as in 4; where they are too few as well, it takes the kind's widest spread (smallest and
   largest residual) with a note.
3. The class's p10 and p90 are prediction-interval quantiles (QUANTILE_METHOD) shrunk toward the kind's pooled ones
   (every architecture's) by the class's number of sources (SHRINK_SOURCES): a class of one or two sources says
   little about how the next source will miss.
4. Where the query lies outside what its class covers (more GPUs than any run of the class, a precision, mode,
   framework or GPU family the class has no entry of) the range also holds the kind's leave-one-regime-out
   quantiles: the errors the model makes on a regime it was never fitted on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from linkscope.model.ranges.classes import parent_class

RANGE_QUANTILES = (10.0, 90.0)
QUANTILE_METHOD: Literal["weibull"] = "weibull"
"""numpy's i/(n+1) plotting positions: the k-th smallest and largest of n residuals bracket the next one with
probability (n + 1 - 2k) / (n + 1), so a small class's p10..p90 reaches its extremes instead of sitting inside
them (the in-sample quantiles of 5 residuals cover about 60% of a sixth, not 80%)."""
MIN_CLASS_ENTRIES = 3
"""Fewer residuals than this in a fabric class say nothing about its p10 and p90: the range is then the widest."""
MIN_CLASS_SOURCES = 2
"""A class narrowed to a GPU family or precision is used only with residuals from this many sources: one
source's entries share its setup and miss together."""
MIN_KIND_SOURCES = 2
"""A kind whose every entry comes from one source says nothing about how another source's runs miss: its
predictions are far from evidence."""
SHRINK_SOURCES = 1.0
"""A class of s sources weighs s / (s + SHRINK_SOURCES) against the kind's pooled quantiles."""
FAR_GPUS_FACTOR = 8
"""A query on more than this many times the GPUs of the kind's largest recorded run is far from all evidence."""
FAR_MIN_SHARE = 0.30
"""Far from all evidence the range reaches at least 30% below and above the central value, for times and rates
alike: log bounds of log(0.7) and -log(0.7)."""
MIN_HALF_LOG = 0.01
"""No range is narrower than +-1%: a hand-edited class whose residuals are all equal still says it is a range."""

KIND_LABELS = {"training": "training", "collectives": "collective", "inference": "serving",
               "moe": "MoE dispatch/combine", "disaggregated": "disaggregated serving"}
MODE_TEXT = {"full": "full-training", "lora": "LoRA"}


@dataclass(frozen=True)
class Query:
    """What a prediction (or an evidence entry) is, as far as its range goes; None: not known or not applicable
    (a collective has no precision)."""

    kind: str
    fabric_class: str | None = None
    gpu_family: str | None = None
    precision: str | None = None
    mode: str | None = None
    """Training: `full` or `lora`."""
    framework: str | None = None
    """Training: megatron, fsdp or deepspeed (as `step.job.framework_for` resolves it); serving: the engine."""
    gpus: int | None = None
    moe: bool | None = None
    """Training: whether the model routes tokens to experts (a mixture of experts misses in ways a dense model
    does not: its dispatch, its expert GEMMs)."""


@dataclass(frozen=True)
class Residual:
    """One evidence entry's out-of-sample errors, as log(measured / predicted) of a time (a rate's sign turned):
    positive means the model was too fast."""

    source: str
    query: Query
    loso_log: float
    loro_logs: tuple[float, ...] = ()
    """With each regime it belongs to left out of the fit."""


@dataclass(frozen=True)
class Spread:
    """The residual quantiles a prediction's range is made of, and what evidence they come from."""

    p10_log: float
    p90_log: float
    basis: str
    """`training evidence for NVSwitch x IB, several nodes (51 entries, 9 sources)` or why there is none."""
    evidence: bool
    """False: the query is far from all evidence or its class too small; the range is the widest, or +-30%."""
    note: str | None = None
    """What a user must know about the range (far from evidence, widened, fallen back), printed beside it."""
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def half_width_pct(self) -> float:
        """Half the p10..p90 width of a predicted time, percent of the central value."""
        return (math.exp(self.p90_log) - math.exp(self.p10_log)) * 50.0

    def rate_half_width_pct(self) -> float:
        """Half the p10..p90 width of a predicted rate, percent of the central value."""
        return (math.exp(-self.p10_log) - math.exp(-self.p90_log)) * 50.0


def _quantiles(logs: Sequence[float]) -> tuple[float, float]:
    """numpy's percentile with QUANTILE_METHOD, written out: the q-quantile of n sorted values sits at 1-based
    position q(n+1), clamped to the ends (np.percentile's first call costs a predict 10-17 ms of lazy imports)."""
    ordered = np.sort(np.asarray(logs, dtype=float))
    positions = np.asarray(RANGE_QUANTILES) / 100.0 * (len(ordered) + 1)
    lo, hi = np.interp(positions, np.arange(1, len(ordered) + 1), ordered)
    return float(lo), float(hi)


def _upper(value: str | None) -> str:
    return (value or "").upper()


def _far_reasons(query: Query, pool: Sequence[Residual], label: str) -> list[str]:
    """Why the query is far from every record of its kind (none: it is not)."""
    reasons: list[str] = []
    sources = {r.source for r in pool}
    if len(sources) < MIN_KIND_SOURCES:
        reasons.append(f"every {label} entry is from one source ({next(iter(sources))})")
    families = {r.query.gpu_family for r in pool}
    family = query.gpu_family
    if family is not None and family not in families:
        reasons.append(f"no {label} evidence for {family}")
        own: Sequence[Residual] = pool
    else:
        own = [r for r in pool if family is None or r.query.gpu_family == family]
    who = f"{family} " if family is not None and family in families else ""
    mode = query.mode
    modes = {r.query.mode for r in own} - {None}
    if mode is not None and modes and mode not in modes:
        only = ", ".join(MODE_TEXT.get(m, m) for m in sorted(m for m in modes if m is not None))
        reasons.append(f"no {who}{MODE_TEXT.get(mode, mode)} evidence (only {only})")
    precisions = {r.query.precision for r in own} - {None}
    if query.precision is not None and precisions and query.precision not in precisions:
        only = ", ".join(sorted(_upper(p) for p in precisions))
        reasons.append(f"no {who}{_upper(query.precision)} {label} evidence (only {only})")
    frameworks = {r.query.framework for r in pool} - {None}
    if query.framework is not None and frameworks and query.framework not in frameworks:
        reasons.append(f"no {label} evidence under {query.framework}")
    sizes = [r.query.gpus for r in pool if r.query.gpus is not None]
    if query.gpus is not None and sizes and query.gpus > FAR_GPUS_FACTOR * max(sizes):
        reasons.append(f"{query.gpus:,} GPUs is over {FAR_GPUS_FACTOR}x the largest recorded {label} run "
                       f"({max(sizes):,} GPUs)")
    return reasons


def _outside_reasons(query: Query, cls: Sequence[Residual]) -> list[str]:
    """Where the query lies outside what the records of its class cover."""
    reasons: list[str] = []
    sizes = [r.query.gpus for r in cls if r.query.gpus is not None]
    if query.gpus is not None and sizes and query.gpus > max(sizes):
        reasons.append(f"{query.gpus:,} GPUs, past its class's largest recorded run ({max(sizes):,})")
    for attr, text in (("gpu_family", str), ("precision", _upper), ("mode", lambda m: MODE_TEXT.get(m, m)),
                       ("framework", str)):
        value = getattr(query, attr)
        have = {getattr(r.query, attr) for r in cls} - {None}
        if value is not None and have and value not in have:
            reasons.append(f"no {text(value)} entry in its class")
    return reasons


def _narrowed(query: Query, base: Sequence[Residual]) -> tuple[Sequence[Residual], str]:
    """The fabric class's records narrowed to the query's GPU family and precision (then family alone) where that
    leaves enough of them, and the words naming what was kept."""
    for attrs in (("gpu_family", "precision", "mode"), ("gpu_family",)):
        given = [a for a in attrs if getattr(query, a) is not None]
        if not given:
            continue
        sub = [r for r in base if all(getattr(r.query, a) == getattr(query, a) for a in given)]
        if len(sub) >= MIN_CLASS_ENTRIES and len({r.source for r in sub}) >= MIN_CLASS_SOURCES and len(sub) < len(base):
            words = [str(query.gpu_family)] + ([_upper(query.precision)] if "precision" in given else [])
            if "mode" in given and query.mode == "lora":
                words.append("LoRA")
            return sub, " ".join(words) + " "
    return base, ""


def _same_architecture(query: Query, pool: list[Residual]) -> list[Residual]:
    """The kind's records of the query's architecture (dense or mixture of experts) where they are enough for a
    range of their own: a dense model's range is not made of MoE misses."""
    if query.moe is None:
        return pool
    same = [r for r in pool if r.query.moe == query.moe]
    enough = len(same) >= MIN_CLASS_ENTRIES and len({r.source for r in same}) >= MIN_KIND_SOURCES
    return same if enough else pool


def _widest(pool: Sequence[Residual]) -> tuple[float, float]:
    logs = [r.loso_log for r in pool]
    return min(logs), max(logs)


def spread_of(query: Query, residuals: Iterable[Residual]) -> Spread:
    """The p10/p90 log bounds of a prediction matching `query`, made of `residuals` (the packaged records, or in
    `validate` every record but one source's) by the rule of this module."""
    label = KIND_LABELS.get(query.kind, query.kind)
    everything = [r for r in residuals if r.query.kind == query.kind]
    pool = _same_architecture(query, everything)
    if len(pool) < MIN_CLASS_ENTRIES:
        return _far(0.0, 0.0, f"no {label} evidence to make a range of ({len(pool)} entries)",
                    [f"too little {label} evidence for a range ({len(pool)} entries)"])
    far = _far_reasons(query, pool, label)
    widest = _widest(pool)
    if query.fabric_class is None:
        p10, p90 = _quantiles([r.loso_log for r in pool])
        basis = f"all {label} evidence ({len(pool)} entries)"
        return _finish(p10, p90, basis, far, [])
    base, name, backoff = _class_records(query.fabric_class, pool, label)
    if not base:
        fallback = backoff or ""
        return _finish(*widest, fallback, far, [fallback], evidence=False)
    cls, words = _narrowed(query, base)
    sources = len({r.source for r in cls})
    p10_c, p90_c = _quantiles([r.loso_log for r in cls])
    p10_k, p90_k = _quantiles([r.loso_log for r in everything])
    weight = sources / (sources + SHRINK_SOURCES)
    p10, p90 = weight * p10_c + (1 - weight) * p10_k, weight * p90_c + (1 - weight) * p90_k
    basis = f"{label} evidence for {words}{name} ({len(cls)} entries, {sources} source{'s' * (sources > 1)})"
    outside = _outside_reasons(query, cls)
    if outside or backoff:
        loro = [x for r in pool for x in r.loro_logs]
        lo, hi = _quantiles(loro) if len(loro) >= MIN_CLASS_ENTRIES else widest
        p10, p90 = min(p10, lo), max(p90, hi)
    notes = [backoff] if backoff else []
    if outside:
        notes.append(f"outside its class's evidence ({'; '.join(outside)}): widened by the leave-one-regime-out errors")
    return _finish(p10, p90, basis, far, notes, evidence=backoff is None)


def _class_records(cls: str, pool: Sequence[Residual], label: str) -> tuple[Sequence[Residual], str, str | None]:
    """The records of fabric class `cls`, the words naming them and, where the class has fewer than
    MIN_CLASS_ENTRIES, why they are its siblings' instead: the same scale-up kind and size regime over other
    fabrics (`classes.parent_class`), from MIN_CLASS_SOURCES sources. No records: neither has enough, and why."""
    own = [r for r in pool if r.query.fabric_class == cls]
    if len(own) >= MIN_CLASS_ENTRIES:
        return own, cls, None
    have = f"{len(own)} entr{'y' if len(own) == 1 else 'ies'}" if own else "none"
    parent = parent_class(cls)
    siblings = [r for r in pool if r.query.fabric_class and parent_class(r.query.fabric_class) == parent]
    if len(siblings) < MIN_CLASS_ENTRIES or len({r.source for r in siblings}) < MIN_CLASS_SOURCES:
        return (), cls, f"no {label} evidence for {cls} ({have}): the widest range"
    return siblings, f"{parent} over other fabrics", (
        f"no {label} evidence for {cls} ({have}): made of {parent}'s evidence over other fabrics, widened by the "
        f"leave-one-regime-out errors")


def _far(p10: float, p90: float, basis: str, notes: list[str]) -> Spread:
    return _finish(p10, p90, basis, notes, [], evidence=False)


def _finish(p10: float, p90: float, basis: str, far: list[str], notes: list[str], evidence: bool = True) -> Spread:
    """Bounds that hold the central value, at least MIN_HALF_LOG wide either way, and FAR_MIN_SHARE either way far
    from evidence."""
    p10, p90 = min(p10, -MIN_HALF_LOG), max(p90, MIN_HALF_LOG)
    if far:
        floor = math.log(1.0 - FAR_MIN_SHARE)
        p10, p90 = min(p10, floor), max(p90, -floor)
        reasons = "; ".join(far)
        notes = [f"far from all evidence ({reasons}): at least {FAR_MIN_SHARE:.0%} either way", *notes]
        basis = f"{reasons}: {basis}, at least {FAR_MIN_SHARE:.0%} either way"
        evidence = False
    every = tuple(dict.fromkeys(notes))
    return Spread(p10, p90, basis, evidence, "; ".join(every) if every else None, every)
