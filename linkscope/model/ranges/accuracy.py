"""Prediction ranges: the model's out-of-sample errors on the evidence set, applied to a prediction.

data/accuracy.yaml holds, per kind (training steps, collectives, serving, MoE dispatch/combine, disaggregated
serving), one record per evidence entry: its evidence class (fabric class and size regime, GPU family, precision,
full training or LoRA, framework, GPU count) and its leave-one-source-out and leave-one-regime-out errors as
log(measured / predicted) of a time. `linkscope validate` computes them (model/fidelity/validate.py, range_file),
`benchmarks/fit_calibration.py --write-accuracy` writes them and a test keeps the file equal to what validate
computes. Which records a prediction's range is made of, and how wide it is, is `rule.spread_of`'s job: the same
rule validate applies with each source left out to measure the coverage. A predicted time t spans
t * exp(p10) .. t * exp(p90); a rate the inverse.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware import built_cache
from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import parse_yaml_text, read_data_text
from linkscope.hardware.system import System
from linkscope.model.ranges.classes import fabric_class, gpu_family
from linkscope.model.ranges.rule import Query, Residual, Spread, spread_of

__all__ = ["ACCURACY_FILE", "AccuracyFile", "KindRange", "ResidualRecord", "Spread", "accuracy_file",
           "accuracy_ranges", "rate_range", "residuals", "spread", "time_range"]

ACCURACY_FILE = Path(__file__).parents[1] / "data" / "accuracy.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ResidualRecord(_Strict):
    """One evidence entry's class and out-of-sample errors (log of measured / predicted time)."""

    source: str
    fabric_class: str | None = Field(default=None, alias="class")
    family: str | None = None
    precision: str | None = None
    mode: str | None = None
    framework: str | None = None
    gpus: int | None = Field(default=None, ge=1)
    moe: bool | None = None
    loso: float
    loro: list[float] = []

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, populate_by_name=True)


class KindRange(_Strict):
    """One kind's pooled residual quantiles (what a prediction without a System gets)."""

    n: int = Field(ge=1)
    p10_log: float
    p90_log: float


class AccuracyFile(_Strict):
    """data/accuracy.yaml, validated."""

    source: str
    as_of: object
    residuals: dict[str, list[ResidualRecord]]


@functools.cache
def accuracy_file() -> AccuracyFile:
    """The packaged residual records, validated (and kept so between starts)."""
    return built_cache.cached("accuracy", [ACCURACY_FILE], (Path(__file__),), _validated_file)


def _validated_file() -> AccuracyFile:
    return read_accuracy_file(ACCURACY_FILE)


def read_accuracy_file(path: Path) -> AccuracyFile:
    """An accuracy file, validated: a malformed one is a DataError naming the file and field."""
    raw = parse_yaml_text(read_data_text(path), str(path))
    try:
        return AccuracyFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(path), err["msg"], field=".".join(map(str, err["loc"]))) from None


def residuals_of(data: AccuracyFile) -> tuple[Residual, ...]:
    """The records of `data` as the range rule takes them."""
    return tuple(Residual(r.source, Query(kind, r.fabric_class, r.family, r.precision, r.mode, r.framework, r.gpus,
                                                  r.moe),
                          r.loso, tuple(r.loro))
                 for kind, records in data.residuals.items() for r in records)


@functools.cache
def residuals() -> tuple[Residual, ...]:
    """The packaged records as the range rule takes them."""
    return residuals_of(accuracy_file())


def accuracy_ranges() -> dict[str, KindRange]:
    """Per kind, the pooled spread (every class together) a prediction without a System gets."""
    out = {}
    for kind in accuracy_file().residuals:
        s = spread(kind)
        out[kind] = KindRange(n=len(accuracy_file().residuals[kind]), p10_log=s.p10_log, p90_log=s.p90_log)
    return out


def spread(kind: str, system: System | None = None, nodes: int | None = None, trays: int | None = None, *,
           precision: str | None = None, mode: str | None = None, framework: str | None = None,
           gpus: int | None = None, moe: bool | None = None) -> Spread:
    """The spread for a prediction of `kind` on `system` (on `nodes` nodes as NCCL counts them and `trays` of its
    nodes; default its own counts) in `precision`, `mode` (training: full or lora), `framework` (training's, or
    the serving engine) on `gpus` GPUs of a mixture-of-experts model or not (`moe`); without a System, the kind's
    pooled spread. A feature left None is not compared."""
    if system is None:
        query = Query(kind, precision=precision, mode=mode, framework=framework, gpus=gpus, moe=moe)
    else:
        query = Query(kind, fabric_class(system, nodes, trays), gpu_family(system, kind), precision, mode, framework,
                      gpus, moe)
    return _packaged_spread(query)


@functools.lru_cache(maxsize=4096)
def _packaged_spread(query: Query) -> Spread:
    """The rule on the packaged records; a search or an advise run asks the same few queries many times."""
    return spread_of(query, residuals())


def time_range(value: float, kind: str, system: System | None = None, nodes: int | None = None,
               trays: int | None = None, *, precision: str | None = None, mode: str | None = None,
               framework: str | None = None, gpus: int | None = None, moe: bool | None = None) -> tuple[float, float]:
    """p10..p90 of what a predicted time (or any quantity that grows with time) turns out to be (the
    arguments as `spread` takes them)."""
    r = spread(kind, system, nodes, trays, precision=precision, mode=mode, framework=framework, gpus=gpus, moe=moe)
    return value * math.exp(r.p10_log), value * math.exp(r.p90_log)


def rate_range(value: float, kind: str, system: System | None = None, nodes: int | None = None,
               trays: int | None = None, *, precision: str | None = None, mode: str | None = None,
               framework: str | None = None, gpus: int | None = None, moe: bool | None = None) -> tuple[float, float]:
    """p10..p90 of what a predicted rate (tokens/s, bandwidth) turns out to be."""
    r = spread(kind, system, nodes, trays, precision=precision, mode=mode, framework=framework, gpus=gpus, moe=moe)
    return value * math.exp(-r.p90_log), value * math.exp(-r.p10_log)
