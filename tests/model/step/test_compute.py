"""Kernel times: GEMMs at a size-dependent share of peak, element-wise kernels at a share of HBM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from linkscope.hardware import parsed_cache
from linkscope.hardware.loader import load_db
from linkscope.model.step.compute import (PRECISIONS, _validated_constants, compute_constants, gemm_efficiency,
                                          gemm_half_gflop, gemm_time_s, memory_time_s, packaged_constants, peak_tflops)


def test_constants_carry_their_source() -> None:
    c = compute_constants()
    assert c.source and c.as_of
    assert 0 < c.gemm_efficiency_max <= 1 and 0 < c.hbm_efficiency <= 1


def test_small_gemms_reach_less_of_peak_and_none_exceeds_the_ceiling() -> None:
    c = compute_constants()
    gflop = np.logspace(-3, 4, 50)
    eff = gemm_efficiency(gflop, c)
    assert np.all(np.diff(eff) > 0)
    assert np.all((eff > 0) & (eff <= c.gemm_efficiency_max))


def test_gemm_time_is_flops_over_the_reached_share_of_peak() -> None:
    c = compute_constants()
    flops = np.asarray([1e12, 1e15])
    times = gemm_time_s(flops, 989.0, c)
    assert times == pytest.approx(flops / (989e12 * gemm_efficiency(flops / 1e9, c)))
    assert times[1] / times[0] < 1000  # the large GEMM is relatively more efficient


def test_memory_time_scales_with_bytes_and_hbm_bandwidth() -> None:
    db = load_db([])
    c = compute_constants()
    h100, h200 = db.gpus["H100-SXM5-80GB"], db.gpus["H200-SXM-141GB"]
    one = memory_time_s(np.asarray([1e9]), h100, c)
    assert memory_time_s(np.asarray([2e9]), h100, c) == pytest.approx(2 * one)
    assert memory_time_s(np.asarray([1e9]), h200, c) < one  # H200's HBM3e is faster


def test_fp8_peak_doubles_bf16_where_the_gpu_has_it() -> None:
    h100 = load_db([]).gpus["H100-SXM5-80GB"]
    assert PRECISIONS == ("bf16", "fp16", "fp8")
    assert peak_tflops(h100, "fp8") == pytest.approx(2 * peak_tflops(h100, "bf16"), rel=1e-3)  # datasheet rounding


def test_the_half_saturation_size_grows_with_the_throughput_a_gpu_reaches() -> None:
    c = compute_constants()
    a100 = gemm_half_gflop(c, 312.0, c.gemm_efficiency_max)
    assert a100 == pytest.approx(c.gemm_half_gflop)
    h100_fp8 = gemm_half_gflop(c, 1979.0, c.gemm_max("hopper", "fp8"))
    assert h100_fp8 > 3 * a100
    # The same 10-GFLOP GEMM fills an A100 better than an H100 running FP8.
    assert gemm_efficiency(np.asarray(10.0), c, 1.0, a100) > gemm_efficiency(np.asarray(10.0), c, 1.0, h100_fp8)


def test_attention_kernels_tuned_for_an_earlier_generation_reach_less_of_hopper() -> None:
    c = compute_constants()
    flash = c.flash_attention_efficiency
    assert c.attention_share("flash", "hopper") == c.attention_share("flash", "ampere") == flash
    # FlashAttention-2 is Ampere's tuned kernel; on Hopper it reaches less, the Triton kernel less still.
    assert c.attention_share("flash2", "ampere") == flash
    assert c.attention_share("triton", "ampere") < flash
    assert c.attention_share("triton", "hopper") < c.attention_share("flash2", "hopper") < flash
    # A later generation without a value of its own takes Hopper's; a GPU outside NVIDIA's line Ampere's.
    for kernel in ("flash2", "triton"):
        assert c.attention_share(kernel, "blackwell") == c.attention_share(kernel, "hopper")
        assert c.attention_share(kernel, "cdna3") == c.attention_share(kernel, "ampere")


def test_the_constants_kept_between_starts_equal_freshly_validated_ones(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, str(tmp_path))
    packaged_constants.cache_clear()
    try:
        stored = packaged_constants()
        packaged_constants.cache_clear()
        kept = packaged_constants()  # read back from the cache, not validated
        assert kept == stored == _validated_constants() and kept is not stored
        assert list(tmp_path.glob("built/compute-*.pickle"))
    finally:
        packaged_constants.cache_clear()
