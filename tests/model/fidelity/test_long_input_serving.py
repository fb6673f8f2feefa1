"""Long prompts at the small batches their KV cache allows: TensorRT-LLM v1.0's 20000/2000 rows (evidence.yaml)."""

from __future__ import annotations

import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.fidelity.evidence import InferenceEntry, load_evidence
from linkscope.model.fidelity.evidence_predict import predicted

SOURCE = "trtllm-perf-overview-1.0"


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _rows() -> list[InferenceEntry]:
    return [e for e in load_evidence().inference if e.source == SOURCE and e.input_tokens == 20000]


def test_the_20000_token_rows_are_in_with_the_tables_values() -> None:
    values = {(e.model, e.system, e.tp): e.value for e in _rows()}
    assert values == {("llama3-70b", "hgx-h200", 1): 283, ("llama3-70b", "dgx-h100", 2): 437,
                      ("llama3-8b", "hgx-h200", 1): 1804, ("llama3-8b", "dgx-h100", 1): 1351,
                      ("llama3.1-405b", "hgx-h200", 8): 505, ("llama3.1-405b", "dgx-h100", 8): 345}
    assert all(e.output_tokens == 2000 and e.batch is None and e.precision == "fp8" for e in _rows())


def test_70b_at_20000_tokens_on_one_h200_is_no_longer_predicted_fast(db: HardwareDB) -> None:
    # Its KV cache holds about 20 sequences, so prefill is half the cycle; when prompts hid their GEMMs in every
    # decode step's weight read, the row came out 16% fast.
    row = next(e for e in _rows() if e.model == "llama3-70b" and e.system == "hgx-h200")
    assert predicted(row, db) == pytest.approx(row.value, rel=0.08)
