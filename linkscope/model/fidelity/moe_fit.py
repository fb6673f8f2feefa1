"""The MoE layers' fixed times (moe.yaml `moe_layer_overhead_us`, `moe_expert_overhead_us`) fitted on the MoE
training evidence.

The GEMM shares are fitted on dense runs only (model/fidelity/fit.py), so what an MoE run's step adds beyond
them is the MoE structure: dispatch and combine, grouped expert GEMMs, the router, permutation traffic and these
fixed times, the two constants of them fitted on step times: one per MoE layer and one per local expert (experts
/ ep) of it. The loss is the sum of squared log errors, each source weighing the same; each entry is priced
exactly on a coarse grid of the two and interpolated bilinearly (step time is close to linear in both).
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

COARSE_OVERHEAD_US = np.array([0.0, 1000.0, 2000.0, 3000.0])
FINE_OVERHEAD_US = np.arange(0.0, 3000.01, 25.0)
"""Grids of the per-layer fixed time."""
COARSE_EXPERT_US = np.array([0.0, 150.0, 300.0])
FINE_EXPERT_US = np.arange(0.0, 300.01, 2.5)
"""Grids of the per-local-expert fixed time."""
PRIOR_OVERHEAD_US = (0.0, 0.0)
"""Without MoE training evidence no fixed time is added: the step is its GPU work and communication."""


def moe_training_entries(evidence: EvidenceSet) -> list[TrainingEntry]:
    """Training entries whose model has routed experts."""
    return [e for e in evidence.training if model_presets()[e.model].is_moe]


def predicted_with_overhead(entry: TrainingEntry, db: HardwareDB, overhead_us: tuple[float, float]) -> float:
    """The entry's step time with (`moe_layer_overhead_us`, `moe_expert_overhead_us`) set to `overhead_us`."""
    with overhead_override(overhead_us):
        return predicted(entry, db)


def overhead_override(overhead_us: tuple[float, float]) -> AbstractContextManager[None]:
    """Predict with (`moe_layer_overhead_us`, `moe_expert_overhead_us`) set to `overhead_us`."""
    layer_us, expert_us = overhead_us
    return moe_constants_override(moe_constants().model_copy(
        update={"moe_layer_overhead_us": layer_us, "moe_expert_overhead_us": expert_us}))


def _fine_log_errors(entry: TrainingEntry, db: HardwareDB) -> np.ndarray:
    """The entry's log error on the fine grid (layer x expert), bilinear in the coarse grid's exact prices."""
    coarse = np.array([[predicted_with_overhead(entry, db, (float(a), float(b))) for b in COARSE_EXPERT_US]
                       for a in COARSE_OVERHEAD_US])
    along_layer = np.stack([np.interp(FINE_OVERHEAD_US, COARSE_OVERHEAD_US, coarse[:, j])
                            for j in range(len(COARSE_EXPERT_US))], axis=1)
    fine = np.stack([np.interp(FINE_EXPERT_US, COARSE_EXPERT_US, row) for row in along_layer])
    return np.log(fine / measured(entry))


class PricedMoeTraining:
    """Every MoE training entry's log error on the fine grid of the two fixed times."""

    def __init__(self, entries: list[TrainingEntry], db: HardwareDB) -> None:
        self.entries = entries
        self.log_err = np.stack([_fine_log_errors(e, db) for e in entries]) if entries \
            else np.zeros((0, len(FINE_OVERHEAD_US), len(FINE_EXPERT_US)))

    def fit(self, keep: Callable[[Entry], bool] = lambda e: True) -> tuple[float, float]:
        """The fixed times (per layer, per local expert; us) with the least loss over the entries `keep`
        accepts; PRIOR_OVERHEAD_US if none."""
        kept = [i for i, e in enumerate(self.entries) if keep(e)]
        if not kept:
            return PRIOR_OVERHEAD_US
        weights = np.array(equal_source_weights([self.entries[i].source for i in kept]))
        loss = np.tensordot(weights, self.log_err[kept] ** 2, axes=1)
        i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
        return float(FINE_OVERHEAD_US[i]), float(FINE_EXPERT_US[j])
