"""Prediction ranges: the spread of the model's leave-one-source-out errors on the evidence set, per kind.

data/accuracy.yaml holds the p10 and p90 of log(measured / predicted) for training steps, collectives and
inference; `linkscope validate` computes them (model/fidelity/validate.py, range_quantiles) and a test keeps the file
equal to what it computes. A predicted time t spans t * exp(p10) .. t * exp(p90); a rate the inverse.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import parse_yaml_text, read_data_text

ACCURACY_FILE = Path(__file__).parents[1] / "data" / "accuracy.yaml"


class KindRange(BaseModel):
    """One kind's residual quantiles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(ge=1)
    p10_log: float
    p90_log: float


class AccuracyFile(BaseModel):
    """data/accuracy.yaml, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    as_of: object
    kinds: dict[str, KindRange]


@functools.cache
def accuracy_ranges() -> dict[str, KindRange]:
    """The packaged residual quantiles by kind (training, collectives, inference, moe)."""
    raw = parse_yaml_text(read_data_text(ACCURACY_FILE), str(ACCURACY_FILE))
    try:
        return dict(AccuracyFile.model_validate(raw).kinds)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(ACCURACY_FILE), err["msg"], field=".".join(map(str, err["loc"]))) from None


def time_range(value: float, kind: str) -> tuple[float, float]:
    """p10..p90 of what a predicted time (or any quantity that grows with time) turns out to be."""
    r = accuracy_ranges()[kind]
    return value * math.exp(r.p10_log), value * math.exp(r.p90_log)


def rate_range(value: float, kind: str) -> tuple[float, float]:
    """p10..p90 of what a predicted rate (tokens/s, bandwidth) turns out to be."""
    r = accuracy_ranges()[kind]
    return value * math.exp(-r.p90_log), value * math.exp(-r.p10_log)
