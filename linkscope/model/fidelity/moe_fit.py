"""The MoE layers' fixed time (moe.yaml `moe_layer_overhead_us`) fitted on the MoE training evidence.

The GEMM shares are fitted on dense runs only (model/fidelity/fit.py), so what an MoE run's step adds beyond
them is the MoE structure: dispatch and combine, grouped expert GEMMs, permutation traffic and this fixed time,
the one constant of them fitted on step times. The loss is the sum of squared log errors, each source weighing
the same; each entry is priced exactly on a coarse grid and interpolated (step time is close to linear in it).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import numpy as np

from linkscope.hardware.loader import HardwareDB
from linkscope.model.comm.moe import moe_constants, moe_constants_override
from linkscope.model.fidelity.evidence import Entry, EvidenceSet, TrainingEntry, equal_source_weights
from linkscope.model.fidelity.evidence_predict import measured, predicted
from linkscope.model.step.transformer import model_presets

COARSE_OVERHEAD_US = np.array([0.0, 500.0, 1000.0, 2000.0, 3000.0])
FINE_OVERHEAD_US = np.arange(0.0, 3000.01, 25.0)
PRIOR_OVERHEAD_US = 0.0
"""Without MoE training evidence no fixed time is added: the step is its GPU work and communication."""


def moe_training_entries(evidence: EvidenceSet) -> list[TrainingEntry]:
    """Training entries whose model has routed experts."""
    return [e for e in evidence.training if model_presets()[e.model].is_moe]


def predicted_with_overhead(entry: TrainingEntry, db: HardwareDB, overhead_us: float) -> float:
    """The entry's step time with `moe_layer_overhead_us` set to `overhead_us`."""
    with overhead_override(overhead_us):
        return predicted(entry, db)


def overhead_override(overhead_us: float) -> AbstractContextManager[None]:
    """Predict with `moe_layer_overhead_us` set to `overhead_us`."""
    return moe_constants_override(moe_constants().model_copy(update={"moe_layer_overhead_us": overhead_us}))


class PricedMoeTraining:
    """Every MoE training entry's log error on the fine grid of the fixed time."""

    def __init__(self, entries: list[TrainingEntry], db: HardwareDB) -> None:
        self.entries = entries
        self.log_err = np.stack([
            np.interp(FINE_OVERHEAD_US, COARSE_OVERHEAD_US,
                      [np.log(predicted_with_overhead(e, db, float(us)) / measured(e)) for us in COARSE_OVERHEAD_US])
            for e in entries]) if entries else np.zeros((0, len(FINE_OVERHEAD_US)))

    def fit(self, keep: Callable[[Entry], bool] = lambda e: True) -> float:
        """The fixed time (us) with the least loss over the entries `keep` accepts; PRIOR_OVERHEAD_US if none."""
        kept = [i for i, e in enumerate(self.entries) if keep(e)]
        if not kept:
            return PRIOR_OVERHEAD_US
        weights = np.array(equal_source_weights([self.entries[i].source for i in kept]))
        loss = weights @ self.log_err[kept] ** 2
        return float(FINE_OVERHEAD_US[int(np.argmin(loss))])
