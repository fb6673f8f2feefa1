"""The best recorded run per GPU family and format (data/records.yaml, read by model/ranges/records.py)."""

from __future__ import annotations

from linkscope.hardware.loader import load_db
from linkscope.model.fidelity.evidence import TrainingEntry, load_evidence
from linkscope.model.ranges.records import above_record_flag, best_record, best_records
from linkscope.model.ranges.mfu import mfu_peak
from linkscope.model.step.transformer import model_presets


def test_records_are_the_evidence_entries_mfu_through_the_one_owner() -> None:
    a100 = load_db(include_user=False).systems["dgx-a100"].node.gpu
    peak = mfu_peak(a100, "bf16")
    record = best_record("training", peak)
    assert record is not None and 0 < record.mfu < 1
    # The record is an entry of the evidence set, its MFU recomputed from its configuration.
    entries = [e for e in load_evidence().training if e.source == record.source and e.system == "dgx-a100"
               and record.what.startswith(f"{e.model} on {e.gpus} GPUs") and e.lora_rank is None]
    assert entries

    def mfu(e: TrainingEntry) -> float:
        model = model_presets()[e.model]
        tflops = model.model_flops_per_token(e.seq_len) * e.global_batch * e.seq_len / e.step_time_s / e.gpus / 1e12
        return float(peak.mfu(tflops))

    assert abs(record.mfu - max(map(mfu, entries))) < 1e-9


def test_every_record_is_below_its_peak_and_keyed_by_family_and_format() -> None:
    records = best_records()
    assert {"training", "serving"} <= {kind for kind, _, _ in records}
    for (kind, family, precision), r in records.items():
        assert (r.kind, r.family, r.precision) == (kind, family, precision)
        assert 0 < r.mfu < 1, r


def test_the_flag_names_the_family_format_peak_and_the_record() -> None:
    a100 = load_db(include_user=False).systems["dgx-a100"].node.gpu
    peak = mfu_peak(a100, "bf16")
    record = best_record("training", peak)
    assert record is not None
    assert above_record_flag("training", record.mfu, peak) is None
    flag = above_record_flag("training", record.mfu + 0.05, peak)
    assert flag is not None and flag.startswith("above every recorded A100 BF16 run: ")
    assert peak.label in flag and record.source in flag and f"best recorded {record.mfu:.0%}" in flag


def test_no_record_no_flag() -> None:
    mi355x = load_db(include_user=False).systems["mi355x-8x"].node.gpu
    peak = mfu_peak(mi355x, "bf16")
    if best_record("training", peak) is None:
        assert above_record_flag("training", 0.99, peak) is None
