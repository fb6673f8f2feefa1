"""Every prediction carries its p10..p90 range from the leave-one-source-out errors of its kind."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.ranges.accuracy import accuracy_ranges, rate_range, time_range
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.step.infer import InferJob, estimate_inference, summary
from linkscope.model.step.predict import predict_train
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import model_presets
from tests.cli.helpers import run_cli


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _brackets(value: float, span: tuple[float, float] | list[float]) -> bool:
    return span[0] <= value <= span[1] and span[0] > 0


def test_time_and_rate_ranges_are_inverse() -> None:
    lo, hi = time_range(10.0, "training")
    r = accuracy_ranges()["training"]
    assert lo == pytest.approx(10.0 * np.exp(r.p10_log)) and hi == pytest.approx(10.0 * np.exp(r.p90_log))
    rlo, rhi = rate_range(1.0 / 10.0, "training")
    assert rlo == pytest.approx(1.0 / hi) and rhi == pytest.approx(1.0 / lo)


def test_training_prediction_has_ranges(db: HardwareDB) -> None:
    job = Job(model=model_presets()["llama2-7b"], global_batch=64, seq_len=4096)
    p = predict_train(job, db.systems["dgx-h100"], LayoutRequest(tp=1, pp=1, dp=8))
    assert _brackets(p.step_time_s, p.step_time_s_range)
    assert _brackets(p.tokens_per_s, p.tokens_per_s_range)


def test_collective_and_inference_predictions_have_ranges(db: HardwareDB) -> None:
    row = predict_sizes(db.systems["dgx-h100"], "all_reduce", [1 << 20])[0]
    assert _brackets(row.time_us, row.time_us_range)
    job = InferJob(model=model_presets()["llama2-13b"], tp=1, pp=1, input_tokens=1024, output_tokens=256)
    system = db.systems["dgx-h100"]
    data = summary(job, system, estimate_inference(job, system, np.asarray([8])), 0)
    assert _brackets(data["tokens_per_s_per_gpu"], data["tokens_per_s_per_gpu_range"])
    assert _brackets(data["time_per_output_token_s"], data["time_per_output_token_s_range"])


def test_ranges_reach_the_json_and_the_tables() -> None:
    result = run_cli("predict", "train", "--system", "dgx-a100", "--gpus", "8", "--model", "llama2-7b",
                     "--global-batch", "64", "--json")
    data = json.loads(result.stdout)
    assert _brackets(data["step_time_s"], data["step_time_s_range"])
    table = run_cli("predict", "collective", "--system", "dgx-h100", "--bytes", "1M").stdout
    assert "range" in table and "%" in table


def test_a_range_comes_from_its_own_fabric_class(db: HardwareDB) -> None:
    from linkscope.model.ranges.accuracy import spread

    one_node = spread("collectives", db.systems["dgx-h100"], gpus=8)
    assert one_node.evidence and "NVSwitch, one node" in one_node.basis and one_node.note is None
    # Two nodes over InfiniBand: that class's misses, not the EFA or TCP clusters'.
    ib = predict_sizes(db.systems["dgx-h100"], "all_reduce", [1 << 30], 16)[0]
    assert ib.nodes == 2 and "NVSwitch x IB, several nodes" in ib.range_basis
    assert ib.time_us_range == pytest.approx(time_range(ib.time_us, "collectives", db.systems["dgx-h100"], 2,
                                                        gpus=16))
    from linkscope.model.ranges.accuracy import residuals

    widest = max(r.loso_log for r in residuals() if r.query.kind == "collectives")
    assert ib.time_us_range[1] / ib.time_us < np.exp(widest)


def test_a_class_without_evidence_says_so_and_gets_the_widest_range(db: HardwareDB) -> None:
    from linkscope.model.ranges.accuracy import residuals, spread

    logs = [r.loso_log for r in residuals() if r.query.kind == "training"]
    pcie = spread("training", db.systems["pcie-l40s"].with_nodes(2))
    assert not pcie.evidence and pcie.note is not None
    assert "no training evidence for PCIe x" in pcie.note and "the widest range" in pcie.note
    # L40S has no training evidence at all: far from evidence as well, at least 30% either way.
    assert "far from all evidence (no training evidence for L40S)" in pcie.note
    assert pcie.p10_log <= min(min(logs), np.log(0.7)) + 1e-9 and pcie.p90_log >= max(logs) - 1e-9


def test_a_gpu_family_without_training_evidence_is_flagged_in_predict_and_advise() -> None:
    result = run_cli("predict", "train", "-s", "mi355x-8x", "-m", "llama2-13b", "--gpus", "8", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert "no training evidence for MI355X" in data["range_basis"]
    assert "no training evidence for MI355X" in data["range_note"]
    assert any("no training evidence for MI355X" in f for f in data["flags"])
    assert data["step_time_s_range"][0] <= 0.7 * data["step_time_s"] + 1e-9
    assert data["step_time_s_range"][1] >= data["step_time_s"] / 0.7 - 1e-9
    nvidia = json.loads(run_cli("predict", "train", "-s", "dgx-h100", "-m", "llama2-13b", "--gpus", "8",
                                "--json").stdout)
    assert not any("no training evidence" in f for f in nvidia["flags"]) and nvidia["range_note"] is None
    assert (data["step_time_s_range"][1] / data["step_time_s"]
            > nvidia["step_time_s_range"][1] / nvidia["step_time_s"])
    text = run_cli("predict", "train", "-s", "mi355x-8x", "-m", "llama2-13b", "--gpus", "8").stdout
    assert "no training evidence for MI355X" in text
    scaling = run_cli("predict", "scaling", "-s", "mi355x-8x", "-m", "llama2-7b", "--nodes", "1").stdout
    assert "ranges: far from all evidence (no training evidence for MI355X" in " ".join(scaling.split())
    advice = run_cli("advise", "train", "-m", "llama2-7b", "--tokens", "10B", "--gpu", "L40S", "--gpus", "8",
                     "--json")
    assert advice.exit_code == 0, advice.stderr
    rows = [r for r in json.loads(advice.stdout)["rows"] if r["feasible"]]
    assert rows and all(any("no training evidence for L40S" in n for n in r["notes"]) for r in rows)


def test_mi300x_and_mi325x_training_ranges_say_there_is_only_lora_fp8_evidence() -> None:
    # MI300X and MI325X training evidence is the MLPerf Llama-2-70B LoRA FP8 runs: a LoRA FP8 query gets the
    # Infinity Fabric mesh's own residuals; a full BF16 one is far from evidence and says why.
    for system in ("tensorwave/mi300x-8x", "mi325x-8x"):
        full = json.loads(run_cli("predict", "train", "-s", system, "-m", "llama2-13b", "--gpus", "8",
                                  "--json").stdout)
        assert "full-training evidence (only LoRA)" in full["range_note"], system
        assert "BF16 training evidence (only FP8)" in full["range_note"], system
        assert full["step_time_s_range"][0] <= 0.7 * full["step_time_s"] + 1e-9
        lora = json.loads(run_cli("predict", "train", "-s", system, "-m", "llama2-13b", "--gpus", "8",
                                  "--peft", "lora", "--lora-rank", "16", "--precision", "fp8",
                                  "--json").stdout)
        assert "training evidence for" in lora["range_basis"] and "mesh, one node" in lora["range_basis"], system
        assert lora["range_note"] is None or "far from all evidence" not in lora["range_note"], system


def test_trays_of_one_nvlink_domain_are_a_class_of_their_own(db: HardwareDB) -> None:
    from linkscope.model.ranges.classes import fabric_class

    rack = db.systems["gb200-nvl72"]
    # One tray is one node's NVSwitch; several trays of a rack, or several racks, are rack-scale NVLink.
    assert fabric_class(rack.with_gpus(4)) == "NVSwitch, one node"
    assert fabric_class(rack.with_gpus(72)) == "NVSwitch across trays, one NVLink domain"
    assert fabric_class(rack.with_gpus(144)) == "NVSwitch across trays x IB, several NVLink domains"
    # A serving group of 4 GPUs on the rack's System is one tray, whatever the System's own tray count.
    assert fabric_class(rack, 1, 1) == "NVSwitch, one node"
    one, two = (predict_sizes(rack, "all_reduce", [1 << 30], g)[0] for g in (72, 144))
    assert "across trays, one NVLink domain" in one.range_basis
    assert "across trays x IB, several NVLink domains" in two.range_basis
    assert _brackets(one.time_us, one.time_us_range) and _brackets(two.time_us, two.time_us_range)
