"""The range rule on records made for each case: nearest class, shrinkage, widening, far from evidence, fallbacks."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from linkscope.model.ranges.accuracy import read_accuracy_file, residuals_of
from linkscope.model.ranges.rule import FAR_MIN_SHARE, Query, Residual, spread_of

FAR_LOG = -math.log(1.0 - FAR_MIN_SHARE)
NVS = "NVSwitch, one node"
IB = "NVSwitch x IB, several nodes"


def _records() -> list[Residual]:
    """Training evidence: H100 BF16 full runs from four sources on one node and over IB, MI300X LoRA FP8 runs from
    two sources on a mesh; regime-left-out errors a little wider than the source-left-out ones."""
    out = []
    for i, source in enumerate(("a", "b", "c", "d")):
        for j, size in enumerate((8, 8, 8)):
            out.append(Residual(source, Query("training", NVS, "H100", "bf16", "full", "megatron", size),
                                0.02 * (i - 1.5) + 0.01 * j, (0.15 * (i - 1.5),)))
        out.append(Residual(source, Query("training", IB, "H100", "bf16", "full", "megatron", 64 * (i + 1)),
                            0.03 * (i - 1), ()))
    for source in ("amd-1", "amd-2"):
        for k in range(2):
            out.append(Residual(source, Query("training", "mesh, one node", "MI300X", "fp8", "lora", "megatron", 8),
                                0.01 * k, ()))
    return out


def _is_far(lo: float, hi: float) -> bool:
    return lo <= -FAR_LOG + 1e-9 and hi >= FAR_LOG - 1e-9


def test_a_query_inside_its_class_gets_its_class_spread_without_a_note() -> None:
    s = spread_of(Query("training", NVS, "H100", "bf16", "full", "megatron", 8), _records())
    assert s.evidence and s.note is None
    assert s.basis == "training evidence for NVSwitch, one node (12 entries, 4 sources)"
    assert s.p10_log < 0 < s.p90_log and s.half_width_pct < 10.0


def test_a_small_class_is_shrunk_toward_the_kinds_pooled_spread() -> None:
    # The IB class: four residuals from four sources; its range is pulled toward the pool (which holds the
    # one-node runs too), so it is not simply its own p10..p90.
    records = _records()
    alone = spread_of(Query("training", IB, "H100", "bf16", "full", "megatron", 64),
                      [r for r in records if r.query.fabric_class == IB])
    pooled = spread_of(Query("training", IB, "H100", "bf16", "full", "megatron", 64), records)
    assert pooled.p10_log != pytest.approx(alone.p10_log)


def test_past_the_largest_run_of_its_class_the_range_is_widened_by_the_regime_errors_and_says_so() -> None:
    inside = spread_of(Query("training", NVS, "H100", "bf16", "full", "megatron", 8), _records())
    past = spread_of(Query("training", NVS, "H100", "bf16", "full", "megatron", 16), _records())
    assert past.note is not None and "past its class's largest recorded run (8)" in past.note
    assert past.p10_log < inside.p10_log and past.p90_log > inside.p90_log
    assert not _is_far(past.p10_log, past.p90_log) and past.evidence


@pytest.mark.parametrize(("query", "words"), [
    (Query("training", NVS, "B200", "bf16", "full", "megatron", 8), "no training evidence for B200"),
    (Query("training", NVS, "H100", "bf16", "full", "deepspeed", 8), "no training evidence under deepspeed"),
    (Query("training", IB, "H100", "bf16", "full", "megatron", 8 * 256 + 1), "over 8x the largest recorded"),
    (Query("training", "mesh, one node", "MI300X", "bf16", "full", "megatron", 8),
     "no MI300X full-training evidence (only LoRA); no MI300X BF16 training evidence (only FP8)"),
])
def test_far_from_all_evidence_the_range_is_at_least_30_pct_and_says_why(query: Query, words: str) -> None:
    s = spread_of(query, _records())
    assert _is_far(s.p10_log, s.p90_log) and not s.evidence
    assert s.note is not None and s.note.startswith("far from all evidence") and words in s.note
    assert words in s.basis


def test_lora_fp8_on_mi300x_stays_near_its_evidence() -> None:
    s = spread_of(Query("training", "mesh, one node", "MI300X", "fp8", "lora", "megatron", 8), _records())
    assert s.evidence and not _is_far(s.p10_log, s.p90_log)


def test_a_class_with_one_entry_falls_back_to_the_widest_range_with_a_note() -> None:
    records = [*_records(), Residual("e", Query("training", "PCIe, one node", "H100", "bf16", "full", "megatron", 8),
                                     0.5, ())]
    s = spread_of(Query("training", "PCIe, one node", "H100", "bf16", "full", "megatron", 8), records)
    logs = [r.loso_log for r in records]
    assert (s.p10_log, s.p90_log) == (min(logs), max(logs)) and not s.evidence
    assert s.note == "no training evidence for PCIe, one node (1 entry): the widest range"


def test_equal_residuals_never_make_a_zero_width_range() -> None:
    records = [Residual(src, Query("moe", NVS, "H100", "fp8", gpus=8), 0.0, ()) for src in ("x", "y") for _ in "abc"]
    s = spread_of(Query("moe", NVS, "H100", "fp8", gpus=8), records)
    assert s.p10_log < 0 < s.p90_log


def test_a_kind_whose_evidence_is_one_source_is_far_from_evidence() -> None:
    records = [Residual("only", Query("moe", NVS, "H100", "fp8", gpus=8), 0.01 * k, ()) for k in range(5)]
    s = spread_of(Query("moe", NVS, "H100", "fp8", gpus=8), records)
    assert _is_far(s.p10_log, s.p90_log) and s.note is not None and "from one source (only)" in s.note


def test_a_hand_edited_accuracy_file_with_a_one_entry_class_falls_back_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "accuracy.yaml"
    rows = "\n".join(f'    - {{source: "s{i}", class: "{NVS}", family: "H100", gpus: 8, loso: {0.01 * i}}}'
                     for i in range(4))
    path.write_text(f'source: "hand"\nas_of: 2026-12-07\nresiduals:\n  collectives:\n{rows}\n'
                    f'    - {{source: "t", class: "{IB}", family: "H100", gpus: 16, loso: 0.2}}\n')
    records = residuals_of(read_accuracy_file(path))
    s = spread_of(Query("collectives", IB, "H100", gpus=16), records)
    assert not s.evidence and s.note is not None and "(1 entry): the widest range" in s.note
    assert s.p90_log - s.p10_log > 0.1


def test_a_class_without_evidence_borrows_its_siblings_over_other_fabrics_widened_and_says_so() -> None:
    roce = "NVSwitch x RoCE, several nodes"
    s = spread_of(Query("training", roce, "H100", "bf16", "full", "megatron", 64), _records())
    inside = spread_of(Query("training", IB, "H100", "bf16", "full", "megatron", 64), _records())
    assert s.note is not None and s.note.startswith(f"no training evidence for {roce} (none): made of NVSwitch, "
                                                    f"several nodes's evidence over other fabrics, widened")
    assert "NVSwitch, several nodes over other fabrics (4 entries, 4 sources)" in s.basis
    # Widened by the regime-left-out errors (+-0.225 in these records), never narrower than the siblings' own.
    assert s.p10_log <= min(inside.p10_log, -0.2) and s.p90_log >= max(inside.p90_log, 0.2)
    assert not s.evidence and not _is_far(s.p10_log, s.p90_log)


def test_siblings_of_one_source_do_not_make_a_range() -> None:
    records = [r for r in _records() if r.query.fabric_class != IB or r.source == "a"]
    records += [Residual("a", Query("training", IB, "H100", "bf16", "full", "megatron", 16), 0.0, ()) for _ in "xy"]
    s = spread_of(Query("training", "NVSwitch x RoCE, several nodes", "H100", "bf16", "full", "megatron", 64),
                  records)
    assert s.note is not None and "(none): the widest range" in s.note


def test_a_dense_models_range_is_not_made_of_mixture_of_experts_misses() -> None:
    dense = [Residual(src, Query("training", NVS, "H100", "bf16", "full", "megatron", 8, moe=False), 0.01 * k, ())
             for src in ("a", "b") for k in range(3)]
    moe = [Residual(src, Query("training", NVS, "H100", "bf16", "full", "megatron", 8, moe=True), 0.6 + 0.1 * k, ())
           for src in ("c", "d") for k in range(3)]
    s = spread_of(Query("training", NVS, "H100", "bf16", "full", "megatron", 8, moe=False), dense + moe)
    both = spread_of(Query("training", NVS, "H100", "bf16", "full", "megatron", 8), dense + moe)
    # The dense class is its own six records, shrunk (2 sources: weight 2/3) toward the kind's pooled quantiles.
    assert "(6 entries, 2 sources)" in s.basis and "(12 entries, 4 sources)" in both.basis
    assert s.p90_log == pytest.approx(2 / 3 * 0.02 + 1 / 3 * 0.8) and s.p90_log < both.p90_log - 0.4
    m = spread_of(Query("training", NVS, "H100", "bf16", "full", "megatron", 8, moe=True), dense + moe)
    assert m.p90_log > 0.6
    # Too few records of its own architecture: the kind's records, both architectures, make the range.
    lone = spread_of(Query("training", NVS, "H100", "bf16", "full", "megatron", 8, moe=True), dense + moe[:3])
    assert "(9 entries, 3 sources)" in lone.basis


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 40])
def test_the_quantiles_are_numpys_weibull_percentiles(n: int) -> None:
    import numpy as np

    from linkscope.model.ranges.rule import QUANTILE_METHOD, RANGE_QUANTILES, _quantiles

    logs = np.random.default_rng(n).normal(0.0, 0.1, n)
    expected = np.percentile(logs, RANGE_QUANTILES, method=QUANTILE_METHOD)
    assert _quantiles(list(logs)) == pytest.approx(tuple(expected), abs=1e-12)
