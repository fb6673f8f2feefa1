"""The collective model's fitted constants (data/comm_fit.yaml), fitted on the collectives of the evidence set.

Five constants: two of NVLS (model/comm/collectives.py), the per-chunk overhead (`_nvls_chunk_extra_us`) and
the single-node synchronisation cost added to NCCL's NVLS latency (`nvls`); two of rings between A100s over
NVLink (`_ampere_ring`), the scale of NCCL's per-hop latency and the share of its LL cap; and the host time of
one NCCL call (model/comm/issue.py), which floors an operation of a back-to-back nccl-tests loop. Each entry is
priced without the floor on the grid of the NVLS pairs or on that of the A100 pairs, whichever moves it (no
entry moves along both: A100s have no NVLS; one that moves along neither is priced once); the floor is a
maximum over that time, so it is applied to the priced grid for every host time on its own grid. The loss is
the sum of squared log errors, each source weighing the same whatever its row count; a constant no remaining
entry depends on keeps its prior, and among grid pairs the remaining entries price alike the one nearest the
prior wins (a leave-one-regime-out fold must not move an unpinned constant to an end of its range).
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
HOP_SCALE_GRID = np.round(np.arange(1.0, 4.001, 0.25), 2)
"""1 (NCCL's per-hop latency) to 4: an A100 sweep's 32 KiB .. 32 MiB all-reduces lie on 2-3 times NCCL's hops."""
LL_SHARE_GRID = np.round(np.arange(0.3, 1.001, 0.05), 2)
"""0.3 to 1 (NCCL's LL cap): LL stores an 8-byte flag with every 8 bytes, which NCCL's cap already counts."""
_GRID = [(float(o), float(c)) for o in OVERHEAD_GRID_US for c in SYNC_GRID_US]
_AMPERE_GRID = [(float(h), float(s)) for h in HOP_SCALE_GRID for s in LL_SHARE_GRID]
_NO_FLOOR_US = 1e-9


class PricedCollectives:
    """Every collective entry's log error over the grids of constants; fits on any subset are then cheap."""

    def __init__(self, entries: list[CollectiveEntry], db: HardwareDB) -> None:
        self.entries = entries
        priced = [self._price(e, db) for e in entries]
        self.gpu_nvls = np.array([p[0] for p in priced])
        """(entries, NVLS pairs) log errors without the floor; constant along the pairs for other entries."""
        self.gpu_ampere = np.array([p[1] for p in priced])
        """(entries, A100 pairs) log errors without the floor; constant along the pairs for other entries."""
        self.on_ampere = np.array([p[2] for p in priced], dtype=bool)
        self.floor = np.array([[_floor_log_error(e, float(h)) for h in HOST_GRID_US] for e in entries])
        self.is_time = np.array([e.metric == "time_us" for e in entries], dtype=bool)

    @staticmethod
    def _price(entry: CollectiveEntry, db: HardwareDB) -> tuple[np.ndarray, np.ndarray, bool]:
        def log_error(pair: tuple[float, float], ampere: tuple[float, float] | None = None) -> float:
            with comm_fit_override(with_nvls_fit(*pair, call_host_us=_NO_FLOOR_US, ampere=ampere)):
                return float(np.log(predicted(entry, db) / measured(entry)))

        hop = (float(HOP_SCALE_GRID[0]), float(HOP_SCALE_GRID[-1]))
        share = (float(LL_SHARE_GRID[-1]), float(LL_SHARE_GRID[0]))
        neutral = (hop[0], share[0])
        base = log_error(_GRID[0], neutral)
        corners = [log_error(_GRID[-1], neutral), log_error((_GRID[0][0], _GRID[-1][1]), neutral)]
        a_corners = [log_error(_GRID[0], (h, sh)) for h in hop for sh in share if (h, sh) != neutral]
        on_nvls = any(c != base for c in corners)
        on_ampere = any(c != base for c in a_corners)
        if on_nvls and on_ampere:
            raise ValueError(f"{entry.source} {entry.size_bytes} B moves along both the NVLS and the A100 grids")
        if on_ampere:
            return np.full(len(_GRID), base), np.asarray([log_error(_GRID[0], a) for a in _AMPERE_GRID]), True
        nvls = np.asarray([log_error(pair, neutral) for pair in _GRID]) if on_nvls else np.full(len(_GRID), base)
        return nvls, np.full(len(_AMPERE_GRID), base), False

    def _loss(self, gpu: np.ndarray, rows: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """(grid, host) weighted squared log errors of `rows`, each time the larger of the GPUs' and the host's
        and each bandwidth the smaller."""
        g, f = gpu[rows][:, :, None], self.floor[rows][:, None, :]
        err = np.where(self.is_time[rows][:, None, None], np.maximum(g, f), np.minimum(g, f))
        return np.asarray((weight[:, None, None] * err**2).sum(axis=0))

    def fit(self, keep: Callable[[CollectiveEntry], bool] = lambda e: True) -> CommFit:
        """The constants fitted on the entries `keep` accepts (the priors where none depends on them)."""
        mask = np.array([keep(e) for e in self.entries], dtype=bool)
        packaged = packaged_comm_fit()
        prior_pair = (packaged.prior_nvls_chunk_overhead_us, packaged.prior_nvls_sync_us)
        prior_ampere = (packaged.prior_ampere_nvlink_hop_scale, packaged.prior_ampere_ll_share)
        prior_host = packaged.prior_nccl_call_host_us
        if not mask.any():
            return with_nvls_fit(*prior_pair, call_host_us=prior_host, ampere=prior_ampere)
        weight = np.array(equal_source_weights([e.source for e, m in zip(self.entries, mask) if m]))
        kept = np.flatnonzero(mask)
        a_rows = self.on_ampere[kept]
        # No entry moves along both grids, so the loss separates: the A100 entries' part depends on the A100
        # pair and the host time, every other entry's on the NVLS pair and the host time.
        loss_nvls = self._loss(self.gpu_nvls, kept[~a_rows], weight[~a_rows])
        loss_ampere = self._loss(self.gpu_ampere, kept[a_rows], weight[a_rows])
        if loss_nvls.size == 0:
            loss_nvls = np.zeros((len(_GRID), len(HOST_GRID_US)))
        if loss_ampere.size == 0:
            loss_ampere = np.zeros((len(_AMPERE_GRID), len(HOST_GRID_US)))
        total = loss_nvls.min(axis=0) + loss_ampere.min(axis=0)
        # Where the entries leave the host time free (every value up to some bound fits them equally), keep the
        # one nearest its prior rather than the grid's first.
        tied = np.flatnonzero(total <= total.min() + 1e-12)
        host_idx = int(tied[np.argmin(np.abs(HOST_GRID_US[tied] - prior_host))])
        pair = _nearest_prior(loss_nvls[:, host_idx], _GRID, prior_pair, (OVERHEAD_GRID_US, SYNC_GRID_US))
        ampere = _nearest_prior(loss_ampere[:, host_idx], _AMPERE_GRID, prior_ampere, (HOP_SCALE_GRID, LL_SHARE_GRID))
        host = float(HOST_GRID_US[host_idx]) if np.ptp(total) >= 1e-12 else prior_host
        return with_nvls_fit(*pair, call_host_us=host, ampere=ampere)


def _nearest_prior(loss: np.ndarray, grid: list[tuple[float, float]], prior: tuple[float, float],
                   axes: tuple[np.ndarray, np.ndarray]) -> tuple[float, float]:
    """The grid pair of least loss; among pairs the entries cannot tell apart, the one nearest the prior.

    A constant no kept entry pins (the loss is flat along it, e.g. the LL share when only rows too large for LL
    remain) then keeps its physics prior rather than whichever end of its range the grid lists first; each
    axis is measured in units of its grid's span.
    """
    tied = np.flatnonzero(loss <= loss.min() + 1e-12)
    points = np.asarray(grid)[tied]
    span = np.array([float(np.ptp(a)) or 1.0 for a in axes])
    best = int(np.argmin((((points - np.asarray(prior)) / span) ** 2).sum(axis=1)))
    return grid[int(tied[best])]


def _floor_log_error(entry: CollectiveEntry, call_host_us: float) -> float:
    """Log error of the entry's metric were the operation as long as its host floor at `call_host_us`."""
    floor_us = entry.gpus_per_thread * call_host_us
    if entry.metric == "time_us":
        return float(np.log(floor_us / measured(entry)))
    busbw = algbw_gb_per_s(entry.size_bytes, floor_us) * float(bus_factors(entry.op, entry.gpus))
    return float(np.log(busbw / measured(entry)))
