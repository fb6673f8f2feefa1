"""`bench train`'s comparison block names the peak a measured MFU is of (model/ranges/mfu.py)."""

from __future__ import annotations

from typing import Any

from linkscope.report.train import point_lines


def _doc(**extra: Any) -> dict[str, Any]:
    par = {"layout": "ddp", "dp": 8, "tp": 1, "zero": 0, "precision": "bf16", "recompute": "none"}
    return {"model": "llama3-8b", "ranks": 8, "backend": "nccl", "parallelism": par, "tokens_per_step": 65536,
            "step_time_s": 1.0, "step_time_s_stdev": 0.01, "steps": {}, "tokens_per_s": 65536.0,
            "tflops_per_rank": 400.0, "mfu": 400.0 / 989.0, "peak_memory_gib": 60.0, "peak_memory_kind": "allocated",
            "predicted": None, "error_pct": None, **extra}


def test_a_gpu_run_names_the_peak_its_mfu_is_of() -> None:
    row = next(line for line in point_lines(_doc(mfu_peak_tflops=989.0, mfu_precision="bf16"))
               if line.startswith("# MFU"))
    assert "40.4%" in row and "(of 989 TFLOP/s BF16 dense)" in row


def test_cpu_ranks_have_no_peak() -> None:
    row = next(line for line in point_lines(_doc(mfu=None, mfu_peak_tflops=None, mfu_precision=None))
               if line.startswith("# MFU"))
    assert "n/a (no peak)" in row and "TFLOP/s" not in row
