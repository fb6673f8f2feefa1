"""The data-parallel knobs in the step model: parsing, refusals, bytes on the wire, encode/decode time, memory."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.system import System
from linkscope.model.calibration.systems import resolve
from linkscope.model.step.compute import compute_constants, memory_time_s
from linkscope.model.step.job import Job
from linkscope.model.step.knob_effect import dp_bytes_per_tier, knob_effect
from linkscope.model.step.knobs import (Knobs, check_knobs, constrained_zero, grad_wire_factor, knob_facts,
                                        knobs_from_options, matrix_shapes, max_powersgd_rank, parse_compression,
                                        parse_zeropp, powersgd_ratio)
from linkscope.model.step.layout import Layout, layouts_of
from linkscope.model.step.memory import gradient_bytes
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import load_model

DDP_32 = Layout(tp=1, pp=1, dp=32, micro_batch=1)
"""Plain data parallelism over four 8-GPU nodes: every gradient crosses the 100 Gb/s TCP network."""


@pytest.fixture(scope="module")
def system() -> System:
    return resolve("gcp/a2-ultragpu-8g", load_db([]), 32, None).system


def _job(knobs: Knobs = Knobs(), model: str = "llama2-7b") -> Job:
    return Job(model=load_model(model), global_batch=32, seq_len=4096, knobs=knobs)


def test_parse_compression_and_zeropp() -> None:
    assert parse_compression("none") == ("none", 0)
    assert parse_compression("powersgd:4") == ("powersgd", 4)
    assert parse_compression("powersgd") == ("powersgd", 1)
    assert parse_zeropp("qw,hp") == frozenset({"qw", "hp"})
    assert Knobs("powersgd", 4, 25.0, frozenset()).label() == "powersgd:4 + bucket 25 MB"


@pytest.mark.parametrize("text", ["zip", "fp16:2", "powersgd:0", "powersgd:-1", "powersgd:x"])
def test_bad_compressions_are_one_line(text: str) -> None:
    with pytest.raises(UserError) as err:
        parse_compression(text)
    assert err.value.field == "grad_compression" and "\n" not in str(err.value)


def test_bad_bucket_and_zeropp() -> None:
    with pytest.raises(UserError, match="above 0"):
        knobs_from_options(bucket_mb=0)
    with pytest.raises(UserError, match="comma-separated"):
        parse_zeropp("qx")


@pytest.mark.parametrize("knobs, framework, zero, needle", [
    (Knobs("powersgd", 4), "fsdp", None, "does not run under fsdp"),
    (Knobs("onebit"), "auto", 3, "does not run with ZeRO stage 3"),
    (Knobs("powersgd", 99999), "auto", 0, "above the smallest matrix dimension 4096"),
    (Knobs(bucket_mb=1e9), "auto", None, "MB of gradients of llama2-7b"),
    (Knobs(zeropp=frozenset({"qw"})), "auto", 1, "ZeRO stage 3 only"),
    (Knobs(zeropp=frozenset({"qw"})), "fsdp", 3, "DeepSpeed's"),
])
def test_knobs_a_job_cannot_run_are_refused(knobs: Knobs, framework: str, zero: int | None, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        check_knobs(knobs, load_model("llama2-7b"), framework, zero)


def test_knobs_fix_the_zero_stage_they_run_with() -> None:
    assert constrained_zero(Knobs("powersgd", 1), None) == 0
    assert constrained_zero(Knobs("onebit"), None) == 0
    assert constrained_zero(Knobs(zeropp=frozenset({"hp"})), None) == 3
    assert constrained_zero(Knobs("fp16"), None) is None
    assert max_powersgd_rank(load_model("llama2-7b")) == 4096


def test_wire_factors_follow_the_bits_sent() -> None:
    m, tp = load_model("llama2-7b"), np.asarray([1.0])
    assert grad_wire_factor(Knobs("fp16"), m, tp, 4.0)[0] == pytest.approx(0.5)
    assert grad_wire_factor(Knobs("bf16"), m, tp, 2.0)[0] == pytest.approx(1.0)  # already 16-bit: no saving
    assert grad_wire_factor(Knobs("onebit"), m, tp, 4.0)[0] == pytest.approx(1 / 32)
    # PowerSGD: r (n + m) values per matrix instead of n m, the layer's vectors whole.
    r = 4
    whole = sum(n * k for n, k in matrix_shapes(m))
    low = sum(r * (n + k) for n, k in matrix_shapes(m))
    rest = m.layer_params() - whole
    assert powersgd_ratio(m, r, tp)[0] == pytest.approx((low + rest) / (whole + rest))


def test_fp16_halves_the_gradient_bytes_on_the_network_and_costs_two_passes(system: System) -> None:
    base, fp16 = _job(), _job(Knobs("fp16"))
    before, after = dp_bytes_per_tier(base, system, DDP_32), dp_bytes_per_tier(fp16, system, DDP_32)
    assert before["scale_up"] == after["scale_up"] == 0.0
    assert after["scale_out"] == pytest.approx(before["scale_out"] / 2)
    # A ring all-reduce sends 2 (n - 1) / n of the gradients per GPU (the step's collectives count the embedding
    # once, so all of the model's weights within a few per cent).
    params = base.model.total_params()
    assert before["scale_out"] == pytest.approx(2 * 31 / 32 * params * gradient_bytes(base), rel=0.03)
    lay = layouts_of(DDP_32)
    est = estimate_steps(fp16, system, lay)
    passes = knob_facts().compressions["fp16"].hbm_passes
    expected = memory_time_s(2 * passes * params * gradient_bytes(base), system.node.gpu, compute_constants())
    assert est.knob_compute_s[0] == pytest.approx(float(expected), rel=0.03)
    plain = estimate_steps(base, system, lay)
    assert est.dp_comm_exposed_s[0] < plain.dp_comm_exposed_s[0]
    assert est.memory_gib_per_gpu[0] == pytest.approx(plain.memory_gib_per_gpu[0])


def test_powersgd_pays_with_an_error_buffer_and_gemms(system: System) -> None:
    effect = knob_effect(_job(Knobs("powersgd", 4)), system, DDP_32)
    params = load_model("llama2-7b").total_params()
    assert effect.memory_gib_added == pytest.approx(params * 4 / 2**30, rel=0.05)
    assert effect.knob_compute_s > 0
    assert sum(effect.bytes_per_gpu_after.values()) < 0.01 * sum(effect.bytes_per_gpu_before.values())
    assert effect.dp_comm_exposed_s_after < effect.dp_comm_exposed_s_before
    assert "no convergence model" in effect.optimisation


def test_one_bit_cannot_overlap_backward(system: System) -> None:
    job = replace(_job(Knobs("onebit")), framework="deepspeed", dp_overlap=True)
    lay = layouts_of(DDP_32)
    overlapped = estimate_steps(job, system, lay)
    serial = estimate_steps(replace(job, dp_overlap=False), system, lay)
    # Its bytes are 1/32 of the gradients' but sent in the optimizer step, after backward: none is hidden.
    assert overlapped.dp_comm_exposed_s[0] == serial.dp_comm_exposed_s[0] > 0


def test_buckets_pay_a_collective_each(system: System) -> None:
    lay = layouts_of(DDP_32)
    small = estimate_steps(replace(_job(Knobs(bucket_mb=1)), dp_overlap=False), system, lay)
    large = estimate_steps(replace(_job(Knobs(bucket_mb=100)), dp_overlap=False), system, lay)
    assert small.dp_comm_exposed_s[0] > large.dp_comm_exposed_s[0]


def test_zeropp_quantises_gathers_and_keeps_backward_gathers_on_the_node(system: System) -> None:
    zero3 = Layout(tp=1, pp=1, dp=32, micro_batch=1, zero=3)
    base = replace(_job(), framework="deepspeed")
    qw = replace(base, knobs=Knobs(zeropp=frozenset({"qw"})))
    hp = replace(base, knobs=Knobs(zeropp=frozenset({"hp"})))
    qg = replace(base, knobs=Knobs(zeropp=frozenset({"qg"})))
    b = dp_bytes_per_tier(base, system, zero3)
    assert b["scale_up"] == 0.0
    assert dp_bytes_per_tier(qw, system, zero3)["scale_out"] < b["scale_out"]
    assert dp_bytes_per_tier(qg, system, zero3)["scale_out"] < b["scale_out"]
    moved = dp_bytes_per_tier(hp, system, zero3)
    assert moved["scale_up"] > 0 and moved["scale_out"] < b["scale_out"]
    effect = knob_effect(hp, system, zero3)
    assert effect.memory_gib_added > 0
    assert effect.dp_comm_exposed_s_after < effect.dp_comm_exposed_s_before


def test_no_knobs_change_nothing(system: System) -> None:
    lay = layouts_of(DDP_32)
    a, b = estimate_steps(_job(), system, lay), estimate_steps(_job(Knobs()), system, lay)
    assert a.step_time_s[0] == b.step_time_s[0] and b.knob_compute_s[0] == 0.0


def test_v100_systems_and_classic_models_are_presets() -> None:
    db = load_db([])
    one = resolve("dgx-1-v100", db, 16, None).system
    assert one.node.gpu.id == "V100-SXM2-16GB" and one.node.gpus == 8
    assert resolve("dgx-1-v100-40gbe", db, 16, None).system.node.scale_out.nic_gbit_per_s == 40
    two = resolve("dgx-2", db, 32, None).system
    assert two.node.gpus == 16 and two.node.gpu.id == "V100-SXM3-32GB"
    assert load_model("bert-large").layers == 24 and load_model("gpt2-xl").hidden == 1600
