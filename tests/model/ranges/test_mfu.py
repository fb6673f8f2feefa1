"""The one owner of the peak an MFU is taken against (model/ranges/mfu.py)."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.hardware.loader import load_db
from linkscope.hardware.specs import host_cpu_spec
from linkscope.model.ranges.mfu import mfu_peak


def test_an_fp8_job_is_measured_against_the_fp8_dense_peak() -> None:
    db = load_db(include_user=False)
    mi355x = db.systems["mi355x-8x"].node.gpu
    h100 = db.systems["dgx-h100"].node.gpu
    assert mfu_peak(mi355x, "fp8").tflops == mi355x.fp8_dense_tflops
    assert mfu_peak(mi355x, "bf16").tflops == mi355x.bf16_dense_tflops
    peak = mfu_peak(h100, "fp8")
    assert (peak.precision, peak.family) == ("fp8", "H100")
    assert peak.label == f"{h100.fp8_dense_tflops:,.0f} TFLOP/s FP8 dense"
    assert peak.text(0.412) == f"41.2% of {peak.label}"
    assert peak.as_dict() == {"mfu_peak_tflops": h100.fp8_dense_tflops, "mfu_precision": "fp8"}
    # The same rate is half the share of the FP8 peak it is of the BF16 one on a GPU whose FP8 peak doubles it.
    rate = 1000.0
    assert mfu_peak(h100, "fp8").mfu(rate) < mfu_peak(h100, "bf16").mfu(rate)


def test_a_bf16_job_on_a_gpu_without_bf16_is_measured_against_fp16() -> None:
    v100 = next(g for g in load_db(include_user=False).gpus.values() if g.bf16_dense_tflops is None
                and g.fp16_dense_tflops > 0)
    peak = mfu_peak(v100, "bf16")
    assert peak.precision == "fp16" and peak.tflops == v100.fp16_dense_tflops and "FP16 dense" in peak.label


def test_no_peak_no_mfu() -> None:
    cpu = mfu_peak(host_cpu_spec("x", 64.0), "bf16")
    assert cpu.tflops == 0 and cpu.text(0.0) == "-"
    assert np.all(cpu.mfu(np.asarray([1.0, 2.0])) == 0)


def test_a_gpu_without_fp8_tensor_cores_has_no_fp8_peak() -> None:
    a100 = load_db(include_user=False).systems["dgx-a100"].node.gpu
    with pytest.raises(ValueError, match="no FP8"):
        mfu_peak(a100, "fp8")
