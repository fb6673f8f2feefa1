"""Prediction ranges: the spread of the model's leave-one-source-out errors on the evidence set.

data/accuracy.yaml holds the p10 and p90 of log(measured / predicted) per kind (training steps, collectives,
inference, MoE dispatch/combine) and, within a kind, per evidence class (`classes.fabric_class`: fabric class and
size regime), the GPU families each kind has evidence for, and each kind's widest spread (its smallest and largest
residual).
`linkscope validate` computes them (model/fidelity/validate.py, range_file) and a test keeps the file equal to
what it computes. A predicted time t spans t * exp(p10) .. t * exp(p90); a rate the inverse.

A prediction on a System takes the range of its own class. Where that class has too little evidence, or the
GPU family has none of the kind, it takes the kind's widest spread and says so: never another class's misses.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware import built_cache
from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import parse_yaml_text, read_data_text
from linkscope.hardware.system import System
from linkscope.model.ranges.classes import fabric_class, gpu_family

ACCURACY_FILE = Path(__file__).parents[1] / "data" / "accuracy.yaml"
MIN_CLASS_ENTRIES = 3
"""Fewer residuals than this in a class say nothing about its p10 and p90: the range is then the widest."""


class KindRange(BaseModel):
    """One kind's (or one class's) residual quantiles."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    n: int = Field(ge=1)
    p10_log: float
    p90_log: float


class AccuracyFile(BaseModel):
    """data/accuracy.yaml, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: str
    as_of: object
    kinds: dict[str, KindRange]
    widest: dict[str, KindRange] = {}
    classes: dict[str, dict[str, KindRange]] = {}
    families: dict[str, list[str]] = {}


@functools.cache
def accuracy_file() -> AccuracyFile:
    """The packaged residual quantiles, validated (and kept so between starts)."""
    return built_cache.cached("accuracy", [ACCURACY_FILE], (Path(__file__),), _validated_file)


def _validated_file() -> AccuracyFile:
    raw = parse_yaml_text(read_data_text(ACCURACY_FILE), str(ACCURACY_FILE))
    try:
        return AccuracyFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(ACCURACY_FILE), err["msg"], field=".".join(map(str, err["loc"]))) from None


def accuracy_ranges() -> dict[str, KindRange]:
    """The packaged residual quantiles by kind, every class pooled (training, collectives, inference,
    moe)."""
    return dict(accuracy_file().kinds)


@dataclass(frozen=True)
class Spread:
    """The residual quantiles a prediction's range is made of, and what evidence they come from."""

    p10_log: float
    p90_log: float
    basis: str
    """`NVSwitch, one node (12 entries)` or why there is no evidence."""
    evidence: bool
    """False: no evidence of this class or GPU family; the kind's widest spread stands in."""


def spread(kind: str, system: System | None = None, nodes: int | None = None, trays: int | None = None) -> Spread:
    """The spread for a prediction of `kind` on `system` (on `nodes` nodes as NCCL counts them and `trays` of its
    nodes; default its own counts); without a System, the kind's pooled spread."""
    data = accuracy_file()
    pooled = data.kinds[kind]
    if system is None:
        return Spread(pooled.p10_log, pooled.p90_log, f"all {kind} evidence ({pooled.n} entries)", True)
    widest = data.widest.get(kind, pooled)
    label = {"training": "training", "collectives": "collective", "inference": "serving",
             "moe": "MoE dispatch/combine"}.get(kind, kind)
    family = gpu_family(system)
    families = data.families.get(kind)
    if families is not None and family not in families:
        return Spread(widest.p10_log, widest.p90_log, f"no {label} evidence for {family}: the widest range", False)
    key = fabric_class(system, nodes, trays)
    own = data.classes.get(kind, {}).get(key)
    if own is None or own.n < MIN_CLASS_ENTRIES:
        have = f"{own.n} entries" if own is not None else "none"
        return Spread(widest.p10_log, widest.p90_log,
                      f"no {label} evidence for {key} ({have}): the widest range", False)
    # A handful of residuals on one side of zero must not make a range that excludes the prediction itself.
    return Spread(min(own.p10_log, 0.0), max(own.p90_log, 0.0), f"{label} evidence for {key} ({own.n} entries)", True)


def time_range(value: float, kind: str, system: System | None = None,
               nodes: int | None = None, trays: int | None = None) -> tuple[float, float]:
    """p10..p90 of what a predicted time (or any quantity that grows with time) turns out to be."""
    r = spread(kind, system, nodes, trays)
    return value * math.exp(r.p10_log), value * math.exp(r.p90_log)


def rate_range(value: float, kind: str, system: System | None = None,
               nodes: int | None = None, trays: int | None = None) -> tuple[float, float]:
    """p10..p90 of what a predicted rate (tokens/s, bandwidth) turns out to be."""
    r = spread(kind, system, nodes, trays)
    return value * math.exp(-r.p90_log), value * math.exp(-r.p10_log)
