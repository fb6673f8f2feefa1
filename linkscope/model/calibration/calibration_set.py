"""The calibration set: Korthikanti et al. 2022, iteration times on Selene (DGX A100 80 GB, HDR InfiniBand).

The only end-to-end results the model's fitted constants may see. Configurations as Calculon's validation
reproduces them (interleaving 3 for 175B and 530B is Calculon's choice); data parallel size 1, s = 2048.
"""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.model.step.layout import Layouts, Recompute, single_layout


@dataclass(frozen=True)
class CalibrationCase:
    """One configuration and its measured iteration time."""

    model: str
    tp: int
    pp: int
    global_batch: int
    micro_batch: int
    interleave: int
    recompute: Recompute
    sequence_parallel: bool
    step_time_s: float

    @property
    def gpus(self) -> int:
        """GPUs of the run (data parallel size 1)."""
        return self.tp * self.pp

    def layout(self) -> Layouts:
        """The case's layout as model input."""
        return single_layout(tp=self.tp, pp=self.pp, dp=1, v=self.interleave, mb=self.micro_batch,
                             recompute=self.recompute, sp=self.sequence_parallel)


SYSTEM = "dgx-a100"
SEQ_LEN = 2048
_SHAPES = [("megatron-22b", 8, 1, 4, 4, 1, 1.42, 1.10), ("gpt3-175b", 8, 8, 64, 1, 3, 18.13, 13.75),
           ("megatron-530b", 8, 35, 280, 1, 3, 49.05, 37.83), ("megatron-1t", 8, 64, 512, 1, 1, 94.42, 71.49)]

CASES: tuple[CalibrationCase, ...] = tuple(
    case
    for model, tp, pp, batch, mb, v, full_s, selective_s in _SHAPES
    for case in (
        CalibrationCase(model, tp, pp, batch, mb, v, "full", False, full_s),
        CalibrationCase(model, tp, pp, batch, mb, v, "selective", True, selective_s),
    )
)
