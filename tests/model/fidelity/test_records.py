"""data/records.yaml is what the evidence set gives (model/fidelity/records.py), and a bad records file is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.model.fidelity.records import computed_records
from linkscope.model.ranges.records import RECORDS_FILE, read_records_file


def test_the_packaged_records_are_what_the_evidence_set_gives() -> None:
    packaged = read_records_file(RECORDS_FILE).records
    assert packaged == computed_records(), "rerun: python benchmarks/fit_calibration.py --write-accuracy"


def test_every_family_and_format_has_one_record_below_its_peak() -> None:
    records = computed_records()
    keys = [(r.kind, r.family, r.precision) for r in records]
    assert len(keys) == len(set(keys)) and {"training", "serving"} <= {r.kind for r in records}
    assert all(0 < r.mfu < 1 for r in records)


@pytest.mark.parametrize("text", ["records: 3\n", "source: x\nas_of: 2026-01-01\nrecords:\n- kind: training\n"
                                  "  family: A100\n  precision: bf16\n  mfu: 1.5\n  source: s\n  what: w\n"])
def test_a_bad_records_file_is_a_data_error_naming_it(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "records.yaml"
    bad.write_text(text)
    with pytest.raises(DataError, match="records.yaml"):
        read_records_file(bad)
