"""The collective model's fitted constants (data/comm_fit.yaml), fitted on the collectives of the evidence set.

Two constants, both of NVLS (model/comm/collectives.py): the per-chunk overhead (`_nvls_chunk_extra_us`) and the
single-node synchronisation cost added to NCCL's NVLS latency (`nvls`). Each entry is priced on a grid of their
pairs; an entry whose prediction does not move along the grid (no NVLS) is priced once. The loss is the sum of
squared log errors, each source weighing the same whatever its row count; a fold whose entries do not depend on
the constants keeps the priors.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from linkscope.hardware.loader import HardwareDB
from linkscope.model.comm.params import CommFit, comm_fit_override, packaged_comm_fit, with_nvls_fit
from linkscope.model.fidelity.evidence import CollectiveEntry, equal_source_weights
from linkscope.model.fidelity.evidence_predict import measured, predicted

OVERHEAD_GRID_US = np.round(np.arange(0.0, 20.001, 0.5), 2)
SYNC_GRID_US = np.round(np.arange(0.0, 40.001, 2.5), 2)
"""0 (NCCL's model as it is) to 40 us: the intercepts of single-node NVLS sweeps lie within 25 + 40 us."""
_GRID = [(float(o), float(c)) for o in OVERHEAD_GRID_US for c in SYNC_GRID_US]


class PricedCollectives:
    """Every collective entry's log error over the grid of constant pairs; fits on any subset are then cheap."""

    def __init__(self, entries: list[CollectiveEntry], db: HardwareDB) -> None:
        self.entries = entries
        self.log_err = np.array([self._price(e, db) for e in entries]).reshape(len(entries), len(_GRID))

    @staticmethod
    def _price(entry: CollectiveEntry, db: HardwareDB) -> np.ndarray:
        def log_error(pair: tuple[float, float]) -> float:
            with comm_fit_override(with_nvls_fit(*pair)):
                return float(np.log(predicted(entry, db) / measured(entry)))

        corners = [log_error(_GRID[0]), log_error(_GRID[-1]), log_error((_GRID[0][0], _GRID[-1][1]))]
        if len(set(corners)) == 1:
            return np.full(len(_GRID), corners[0])
        return np.asarray([log_error(pair) for pair in _GRID])

    def fit(self, keep: Callable[[CollectiveEntry], bool] = lambda e: True) -> CommFit:
        """The constants fitted on the entries `keep` accepts (the priors where none depends on them)."""
        mask = np.array([keep(e) for e in self.entries], dtype=bool)
        packaged = packaged_comm_fit()
        prior = with_nvls_fit(packaged.prior_nvls_chunk_overhead_us, packaged.prior_nvls_sync_us)
        if not mask.any():
            return prior
        rows = self.log_err[mask]
        weight = np.array(equal_source_weights([e.source for e, m in zip(self.entries, mask) if m]))
        loss = (weight[:, None] * rows**2).sum(axis=0)
        if np.ptp(loss) < 1e-12:
            return prior
        return with_nvls_fit(*_GRID[int(np.argmin(loss))])
