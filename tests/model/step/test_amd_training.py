"""AMD training: block recomputation of some layers (the MLPerf MI300X LoRA configs) and the dense-GEMM clock a
power-limited GPU holds (MI300X at 750 W against MI325X at 1,000 W on the same die)."""

from __future__ import annotations

import dataclasses

import pytest

from linkscope.hardware.loader import load_db
from linkscope.model.step import peft as lora
from linkscope.model.step.compute import compute_constants, peak_tflops, sustained_tflops
from linkscope.model.step.job import Job
from linkscope.model.step.layout import single_layout
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import model_presets

LLAMA70 = model_presets()["llama2-70b"]
MLPERF_LORA = Job(model=LLAMA70, global_batch=8, seq_len=8192, precision="fp8",
                  peft=lora.Peft(rank=16, targets="attn", base_precision="fp8"))


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def _step(db, system: str, job: Job, recompute: str = "none"):
    return estimate_steps(job, db.systems[system], single_layout(tp=1, pp=1, dp=8, recompute=recompute, zero=1))


def test_block_recompute_redoes_only_its_layers(db) -> None:
    none, full = _step(db, "mi300x-8x", MLPERF_LORA), _step(db, "mi300x-8x", MLPERF_LORA, "full")
    block = _step(db, "mi300x-8x", dataclasses.replace(MLPERF_LORA, recompute_layers=21), "full")
    # 21 of 80 layers redo their forward: about 21/80 of full recomputation's cost.
    assert block.recompute_s[0] == pytest.approx(full.recompute_s[0] * 21 / 80, rel=1e-6)
    assert none.step_time_s[0] < block.step_time_s[0] < full.step_time_s[0]
    # The other 59 layers keep their activations: memory lies between none and full.
    assert full.memory_gib_per_gpu[0] < block.memory_gib_per_gpu[0] < none.memory_gib_per_gpu[0]
    # A block larger than the stage is the whole stage.
    whole = _step(db, "mi300x-8x", dataclasses.replace(MLPERF_LORA, recompute_layers=500), "full")
    assert whole.step_time_s[0] == pytest.approx(full.step_time_s[0])


def test_a_power_limited_gpu_computes_at_its_dense_gemm_clock(db) -> None:
    c = compute_constants()
    mi300x, mi325x = db.gpus["MI300X"], db.gpus["MI325X"]
    # Same die, same datasheet peak; the 1,000 W part holds a higher clock under dense GEMMs.
    assert peak_tflops(mi300x, "fp8") == peak_tflops(mi325x, "fp8")
    assert sustained_tflops(mi300x, "fp8", c) < sustained_tflops(mi325x, "fp8", c) < peak_tflops(mi325x, "fp8")
    # A GPU without a measured clock keeps its datasheet peak.
    h100 = db.systems["dgx-h100"].node.gpu
    assert sustained_tflops(h100, "bf16", c) == peak_tflops(h100, "bf16")
    slow, fast = _step(db, "mi300x-8x", MLPERF_LORA), _step(db, "mi325x-8x", MLPERF_LORA)
    ratio = slow.step_time_s[0] / fast.step_time_s[0]
    # Mostly compute-bound: close to the clock ratio (1464 / 1230 MHz), HBM adds a little.
    assert 1.1 < ratio < 1.25
    # MFU stays against the datasheet peak, so the faster part shows the higher MFU.
    assert fast.mfu[0] > slow.mfu[0]
