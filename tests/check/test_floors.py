"""Bandwidth verdicts at least as strict as the field: published floors, the plateau, and nothing judged that cannot
be compared. Recorded outputs throughout: no GPU is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.check import rules
from linkscope.check.bandwidth import BandwidthContext
from linkscope.check.items import CheckItem, Thresholds
from linkscope.check.recorded import load_recorded, recorded_items
from linkscope.check.run import expected_system, not_comparable_reason, predictions
from linkscope.check.sizing import (CPU_MAX_BYTES, NVSWITCH_MIN_PLATEAU_BYTES, bandwidth_context, full_sweep,
                                    plateau_bytes)
from linkscope.hardware.loader import load_db
from linkscope.model.comm.predict import predict_sizes
from linkscope.results.records import CollectiveRow

FIXTURES = Path(__file__).parents[1] / "fixtures"
H100_440 = FIXTURES / "nccl_tests" / "derived_h100_8gpu_16g_440.txt"
H100_470 = FIXTURES / "nccl_tests" / "derived_h100_8gpu_16g_470.txt"
MI300X_AAC8 = FIXTURES / "corpus" / "nccl_tests" / "rccl_tests_mi300x_8gpu_aac8.txt"
ND_H100 = "azure/Standard_ND96isr_H100_v5"


def _busbw(items: list[CheckItem]) -> CheckItem:
    return next(i for i in items if ".busbw@" in i.name)


def _judge(path: Path, expect: str) -> list[CheckItem]:
    return recorded_items(load_recorded(str(path), None), expected_system(expect), Thresholds())


def test_440_at_16_gib_on_8_h100_fails_an_nd_h100_v5_naming_azures_floor() -> None:
    item = _busbw(_judge(H100_440, ND_H100))
    assert item.name == f"all_reduce.busbw@{16 << 30}B" and item.status == "FAIL"
    assert item.measured == pytest.approx(440.0, abs=0.01)
    assert "Azure's health-check floor 460 GB/s" in item.fix and "model x 90%" in item.fix
    assert item.limits is not None and item.limits["failed_by"] == "floor"
    assert item.limits["floor_gb_per_s"] == 460.0 and item.limits["model_pass_gb_per_s"] < 460.0  # both shown


def test_470_passes_and_the_same_node_passes_a_preset_without_a_floor_saying_so() -> None:
    assert _busbw(_judge(H100_470, ND_H100)).status == "PASS"
    preset = _busbw(_judge(H100_440, "dgx-h100"))
    assert preset.status == "PASS" and "no published health-check floor for dgx-h100" in preset.source


def test_a_real_mi300x_node_at_316_passes_azures_mi300x_floor() -> None:
    # rccl-tests on 8 x MI300X, its largest size 8 GiB (315.69 / 315.91): judged there against the 16 GiB floor.
    item = _busbw(_judge(MI300X_AAC8, "azure/Standard_ND96isr_MI300X_v5"))
    assert item.status == "PASS" and item.measured == pytest.approx(315.8, abs=0.01)
    assert "Azure's health-check floor 314 GB/s" in item.source and "judged at 8 GiB" in item.source


def test_above_the_floor_but_below_model_x_pass_fails_naming_the_model() -> None:
    # 315.8 GB/s is above Azure's 314 but below 95% of the model's 335.6 (318.8): the higher limit fails it, even
    # where the model alone would only warn.
    expected = expected_system("azure/Standard_ND96isr_MI300X_v5")
    rows = load_recorded(str(MI300X_AAC8), None).rows
    strict = Thresholds(pass_pct=95.0, warn_pct=75.0)
    predicted, _ = predictions(expected, rows, 8)
    items = rules.collective_items(rows, predicted, "", strict, "model",
                                   bandwidth_context(expected, ["all_reduce"], 8, 1))
    item = _busbw(items)
    assert item.status == "FAIL" and item.limits is not None and item.limits["failed_by"] == "model"
    assert "above Azure's health-check floor" in item.fix


def _row(size: int, busbw: float, placement: str = "out_of_place") -> CollectiveRow:
    return CollectiveRow("all_reduce", size, size // 4, "float", "sum", -1, placement, 100.0, busbw / 1.75, busbw, 0,
                         world_size=8)


def test_a_sweep_that_stops_below_the_plateau_never_passes_its_bandwidth() -> None:
    expected = expected_system("dgx-h100")
    rows = [_row(8, 0.0), _row(1 << 20, 500.0), _row(1 << 20, 500.0, "in_place")]  # better than the model, yet
    predicted, _ = predictions(expected, rows, 8)
    ctx = bandwidth_context(expected, ["all_reduce"], 8, 1)
    item = _busbw(rules.collective_items(rows, predicted, "", Thresholds(), "model", ctx))
    assert item.status == "WARN" and "not measured at the plateau" in item.fix and "run --full" in item.fix


def test_gloo_on_cpu_is_never_judged_against_a_gpu_systems_model() -> None:
    expected = expected_system("dgx-h100")
    reason = not_comparable_reason("gloo", expected)
    assert "not comparable" in reason and not not_comparable_reason("nccl", expected)
    rows = [_row(8, 0.0), _row(1 << 28, 0.4)]
    predicted, _ = predictions(expected, rows, 2)
    items = rules.collective_items(rows, predicted, "", Thresholds(), "model", BandwidthContext(not_comparable=reason))
    judged = [i for i in items if i.name != "collective.correctness"]
    assert {i.status for i in judged} == {"SKIP"} and all(i.fix == reason for i in judged)


def test_the_plateau_is_at_least_4_gib_on_nvswitch_and_where_the_model_flattens_elsewhere() -> None:
    assert plateau_bytes(expected_system("dgx-h100"), "all_reduce", 8) == NVSWITCH_MIN_PLATEAU_BYTES
    mesh = plateau_bytes(expected_system("mi300x-8x"), "all_reduce", 8)
    assert mesh is not None and 64 << 20 <= mesh <= 4 << 30
    assert plateau_bytes(expected_system("dgx-h100"), "all_reduce", 1) is None


def test_full_measures_to_the_floor_bounded_by_gpu_memory_and_stays_short_on_cpu() -> None:
    nd = expected_system(ND_H100)
    assert full_sweep(nd, ("all_reduce",), 8, True, 80 * 2**30, None).max_bytes == 16 << 30
    small = full_sweep(nd, ("all_reduce",), 8, True, 20 * 2**30, None)
    assert small.max_bytes == 4 << 30 and "GPU memory" in small.reason
    cpu = full_sweep(expected_system("dgx-h100"), ("all_reduce",), 2, False, None, 64 * 2**30)
    assert cpu.max_bytes == CPU_MAX_BYTES
    assert full_sweep(expected_system("dgx-h100"), ("all_reduce",), 2, False, None, 2**30).max_bytes < CPU_MAX_BYTES


def test_the_h100_plateau_is_checked_against_public_h100_measurements() -> None:
    # The NCCL maintainer's ~480 GB/s (nccl-tests #212), 476 GB/s (#290) and p5.48xlarge's 483 GB/s at 16 GiB
    # (aws-samples, 62239 us): the evidence set's single-node H100 plateau. The model sits about 4-5% under them,
    # so 90% of it stays far under every healthy node and Azure's 460 GB/s floor is what binds on ND H100 v5.
    pred = predict_sizes(load_db().systems["dgx-h100"], "all_reduce", [16 << 30], gpus=8)[0].busbw
    public = (480.0, 476.0, (16 << 30) / 62239e-6 / 1e9 * 1.75)
    for figure in public:
        assert 0.94 * figure <= pred <= figure
    assert 0.9 * pred < 460.0
