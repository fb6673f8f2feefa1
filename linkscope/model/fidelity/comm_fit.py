"""The collective model's fitted constants (data/comm_fit.yaml), fitted on the collectives of the evidence set.

Three constants: two of NVLS (model/comm/collectives.py), the per-chunk overhead (`_nvls_chunk_extra_us`) and
the single-node synchronisation cost added to NCCL's NVLS latency (`nvls`), and the host time of one NCCL call
(model/comm/issue.py), which floors an operation of a back-to-back nccl-tests loop. Each entry is priced without
the floor on a grid of the NVLS pairs (an entry whose prediction does not move along it, no NVLS, is priced
once); the floor is a maximum over that time, so it is applied to the priced grid for every host time on its own
grid. The loss is the sum of squared log errors, each source weighing the same whatever its row count; a
constant no remaining entry depends on keeps its prior.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from linkscope.hardware.loader import HardwareDB
from linkscope.model.comm.params import CommFit, comm_fit_override, packaged_comm_fit, with_nvls_fit
from linkscope.model.fidelity.evidence import CollectiveEntry, equal_source_weights
from linkscope.model.fidelity.evidence_predict import measured, predicted
from linkscope.results.busbw import algbw_gb_per_s, bus_factors

OVERHEAD_GRID_US = np.round(np.arange(0.0, 20.001, 0.5), 2)
SYNC_GRID_US = np.round(np.arange(0.0, 40.001, 2.5), 2)
"""0 (NCCL's model as it is) to 40 us: the intercepts of single-node NVLS sweeps lie within 25 + 40 us."""
HOST_GRID_US = np.round(np.arange(3.0, 8.001, 0.25), 2)
"""3 us (a bare asynchronous CUDA call costs about 2 us from Python on an H200 host, a C caller less, and NCCL
enqueues on top of it) to 8 us (the most one NCCL call in a group of eight took on an H200 host;
benchmarks/results/h200-2026-12-04/nccl_launch.json)."""
_GRID = [(float(o), float(c)) for o in OVERHEAD_GRID_US for c in SYNC_GRID_US]
_NO_FLOOR_US = 1e-9


class PricedCollectives:
    """Every collective entry's log error over the grid of constants; fits on any subset are then cheap."""

    def __init__(self, entries: list[CollectiveEntry], db: HardwareDB) -> None:
        self.entries = entries
        gpu = np.array([self._price(e, db) for e in entries]).reshape(len(entries), len(_GRID))
        floor = np.array([[_floor_log_error(e, float(h)) for h in HOST_GRID_US] for e in entries])
        floor = floor.reshape(len(entries), len(HOST_GRID_US))
        # A time is the larger of the GPUs' and the host's; a bandwidth the smaller.
        is_time = np.array([e.metric == "time_us" for e in entries], dtype=bool)[:, None, None]
        self.log_err = np.where(is_time, np.maximum(gpu[:, :, None], floor[:, None, :]),
                                np.minimum(gpu[:, :, None], floor[:, None, :]))

    @staticmethod
    def _price(entry: CollectiveEntry, db: HardwareDB) -> np.ndarray:
        def log_error(pair: tuple[float, float]) -> float:
            with comm_fit_override(with_nvls_fit(*pair, call_host_us=_NO_FLOOR_US)):
                return float(np.log(predicted(entry, db) / measured(entry)))

        corners = [log_error(_GRID[0]), log_error(_GRID[-1]), log_error((_GRID[0][0], _GRID[-1][1]))]
        if len(set(corners)) == 1:
            return np.full(len(_GRID), corners[0])
        return np.asarray([log_error(pair) for pair in _GRID])

    def fit(self, keep: Callable[[CollectiveEntry], bool] = lambda e: True) -> CommFit:
        """The constants fitted on the entries `keep` accepts (the priors where none depends on them)."""
        mask = np.array([keep(e) for e in self.entries], dtype=bool)
        packaged = packaged_comm_fit()
        prior_pair = (packaged.prior_nvls_chunk_overhead_us, packaged.prior_nvls_sync_us)
        prior_host = packaged.prior_nccl_call_host_us
        if not mask.any():
            return with_nvls_fit(*prior_pair, call_host_us=prior_host)
        rows = self.log_err[mask]
        weight = np.array(equal_source_weights([e.source for e, m in zip(self.entries, mask) if m]))
        loss = (weight[:, None, None] * rows**2).sum(axis=0)
        pair_idx, host_idx = np.unravel_index(int(np.argmin(loss)), loss.shape)
        pair = _GRID[int(pair_idx)] if np.ptp(loss[:, host_idx]) >= 1e-12 else prior_pair
        host = float(HOST_GRID_US[host_idx]) if np.ptp(loss[pair_idx, :]) >= 1e-12 else prior_host
        return with_nvls_fit(*pair, call_host_us=host)


def _floor_log_error(entry: CollectiveEntry, call_host_us: float) -> float:
    """Log error of the entry's metric were the operation as long as its host floor at `call_host_us`."""
    floor_us = entry.gpus_per_thread * call_host_us
    if entry.metric == "time_us":
        return float(np.log(floor_us / measured(entry)))
    busbw = algbw_gb_per_s(entry.size_bytes, floor_us) * float(bus_factors(entry.op, entry.gpus))
    return float(np.log(busbw / measured(entry)))
