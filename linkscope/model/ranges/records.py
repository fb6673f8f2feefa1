"""The best recorded run per GPU family and number format, and the flag of a prediction above it.

A prediction whose MFU (training) or serving MFU is above every run the evidence set records on the same GPU
family in the same format is flagged: the model may be right, but nothing measured backs it. data/records.yaml
holds the records; `model/fidelity/records.py` computes them from each evidence entry's own configuration through
the one MFU owner (model/ranges/mfu.py), `benchmarks/fit_calibration.py --write-accuracy` writes them beside
accuracy.yaml, and a test keeps the file equal to what the evidence set gives, so an entry added to
data/evidence.yaml or data/evidence/*.yaml moves them.

Serving MFU is output tokens/s per GPU x 2 x the weights a token's matmuls use, over the same dense peak: one
figure that compares serving throughput across model sizes (prompt tokens are not counted, on both sides).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware import built_cache
from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import parse_yaml_text, read_data_text
from linkscope.model.ranges.mfu import MfuPeak

RecordKind = Literal["training", "serving"]

RECORDS_FILE = Path(__file__).parents[1] / "data" / "records.yaml"

FLAG_MARGIN = 1.0
"""A prediction is flagged when its MFU is above the best record times this (exactly above, no slack)."""


class Record(BaseModel):
    """One evidence entry's measured MFU, with what it was."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    kind: RecordKind
    family: str
    precision: str
    mfu: float = Field(gt=0, lt=1)
    source: str
    what: str
    """`llama3-70b on 64 GPUs (dgx-h100)`."""


class RecordsFile(BaseModel):
    """data/records.yaml, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: str
    as_of: object
    records: list[Record]


def read_records_file(path: Path) -> RecordsFile:
    """A records file, validated; a bad one is a DataError naming it."""
    raw = parse_yaml_text(read_data_text(path), str(path))
    try:
        return RecordsFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(path), err["msg"], field=".".join(map(str, err["loc"]))) from None


@functools.cache
def best_records() -> dict[tuple[str, str, str], Record]:
    """The best record per (kind, GPU family, format), from the packaged records file."""
    packaged = built_cache.cached("records", [RECORDS_FILE], (Path(__file__),),
                                  lambda: read_records_file(RECORDS_FILE))
    return {(r.kind, r.family, r.precision): r for r in packaged.records}


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
