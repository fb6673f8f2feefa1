"""The peak an MFU is taken against: one owner for every MFU linkscope computes or prints.

MFU = model FLOPs per second per GPU / the dense tensor peak of the number format the job's GEMMs run at. An
FP8 job is measured against the FP8 dense peak, a BF16 job against the BF16 one (FP16 where a GPU has no BF16,
as on V100). Taking every job against the BF16 peak, as papers of the BF16 era did, lets an FP8 job print an
MFU near or above 100% on a GPU whose FP8 peak is twice its BF16 one, and such a figure cannot be compared with
anything. Every output that prints an MFU names this peak (`MfuPeak.label`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from linkscope.hardware.specs import GpuSpec

PRECISION_NAMES = {"bf16": "BF16", "fp16": "FP16", "fp8": "FP8"}
"""How outputs spell each number format."""

Value = TypeVar("Value", float, np.ndarray)


@dataclass(frozen=True)
class MfuPeak:
    """The dense tensor peak of one GPU in one number format, the denominator of its MFU."""

    gpu: str
    family: str
    precision: str
    """The format the peak is for: the job's, or `fp16` for a BF16 job on a GPU without BF16 tensor cores."""
    tflops: float
    """0 on a CPU host, where no MFU is defined."""

    @property
    def label(self) -> str:
        """`1,979 TFLOP/s FP8 dense`."""
        return f"{self.tflops:,.0f} TFLOP/s {self.precision_name} dense"

    @property
    def precision_name(self) -> str:
        """`FP8`, `BF16` or `FP16`."""
        return PRECISION_NAMES.get(self.precision, self.precision.upper())

    def mfu(self, tflops_per_gpu: Value) -> Value:
        """The share of this peak `tflops_per_gpu` reaches; 0 where there is no peak (a CPU host)."""
        if self.tflops <= 0:
            return tflops_per_gpu * 0.0
        return tflops_per_gpu / self.tflops

    def text(self, mfu: float) -> str:
        """`41.2% of 1,979 TFLOP/s FP8 dense`, or `-` where no MFU is defined."""
        return f"{mfu:.1%} of {self.label}" if self.tflops > 0 else "-"

    def as_dict(self) -> dict[str, float | str]:
        """The JSON fields every MFU is printed with."""
        return {"mfu_peak_tflops": self.tflops, "mfu_precision": self.precision}


def mfu_peak(gpu: GpuSpec, precision: str) -> MfuPeak:
    """The peak an MFU of a job in `precision` (bf16, fp16 or fp8) on `gpu` is taken against: the dense tensor
    peak of that format. A GPU without FP8 tensor cores has no FP8 peak (ValueError: callers refuse such jobs
    first, as a user error)."""
    fmt = precision
    if precision == "bf16" and gpu.bf16_dense_tflops is None:
        fmt = "fp16"
    return MfuPeak(gpu=gpu.id, family=gpu.family_name, precision=fmt, tflops=gpu.dense_tflops(precision))
