"""The collective model's fitted constant (data/comm_fit.yaml), fitted on the collectives of the evidence set.

One constant: the NVLS per-chunk overhead (model/comm/collectives.py, `_nvls_chunk_extra_us`). Each entry is
priced on a grid of its values; an entry whose prediction does not move along the grid (no NVLS, or a size
chunked at NCCL's default) is priced once. The loss is the sum of squared log errors, each source weighing
the same whatever its row count; a fold whose entries do not depend on the constant keeps the prior.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from linkscope.hardware.loader import HardwareDB
from linkscope.model.comm.params import CommFit, comm_fit_override, packaged_comm_fit, with_nvls_chunk_overhead
from linkscope.model.fidelity.evidence import CollectiveEntry
from linkscope.model.fidelity.evidence_predict import measured, predicted

OVERHEAD_GRID_US = np.round(np.arange(0.0, 20.001, 0.5), 2)


class PricedCollectives:
    """Every collective entry's log error along the overhead grid; fits on any subset are then cheap."""

    def __init__(self, entries: list[CollectiveEntry], db: HardwareDB) -> None:
        self.entries = entries
        self.log_err = np.array([self._price(e, db) for e in entries]).reshape(len(entries), len(OVERHEAD_GRID_US))

    @staticmethod
    def _price(entry: CollectiveEntry, db: HardwareDB) -> np.ndarray:
        def log_error(overhead: float) -> float:
            with comm_fit_override(with_nvls_chunk_overhead(float(overhead))):
                return float(np.log(predicted(entry, db) / measured(entry)))

        first, last = log_error(OVERHEAD_GRID_US[0]), log_error(OVERHEAD_GRID_US[-1])
        if first == last:
            return np.full(len(OVERHEAD_GRID_US), first)
        inner = [log_error(overhead) for overhead in OVERHEAD_GRID_US[1:-1]]
        return np.asarray([first, *inner, last])

    def fit(self, keep: Callable[[CollectiveEntry], bool] = lambda e: True) -> CommFit:
        """The constant fitted on the entries `keep` accepts (the prior where none depends on it)."""
        mask = np.array([keep(e) for e in self.entries], dtype=bool)
        prior = packaged_comm_fit().prior_nvls_chunk_overhead_us
        if not mask.any():
            return with_nvls_chunk_overhead(prior)
        rows = self.log_err[mask]
        sources = [e.source for e, m in zip(self.entries, mask) if m]
        counts = {s: sources.count(s) for s in set(sources)}
        weight = np.array([1.0 / counts[s] for s in sources])
        loss = (weight[:, None] * rows**2).sum(axis=0)
        if np.ptp(loss) < 1e-12:
            return with_nvls_chunk_overhead(prior)
        return with_nvls_chunk_overhead(float(OVERHEAD_GRID_US[int(np.argmin(loss))]))
