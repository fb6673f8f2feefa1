"""The collective model's fitted constants (data/comm_fit.yaml), fitted on the collectives of the evidence set.

Six constants: two of NVLS (model/comm/collectives.py), the per-chunk overhead (`_nvls_chunk_extra_us`) and
the single-node synchronisation cost added to NCCL's NVLS latency (`nvls`); two of rings between A100s over
NVLink (`_ampere_ring`), the scale of NCCL's per-hop latency and the share of its LL cap; the per-hop cost of
an EFA network hop beyond InfiniBand (model/comm/tiers.py); and the host time of one NCCL call
(model/comm/issue.py), which floors an operation of a back-to-back nccl-tests loop. Each entry is priced without
the floor on the grid of the NVLS pairs, of the A100 pairs or of the EFA costs, whichever moves it (no entry moves
along two: A100s have no NVLS, and no EFA row runs a ring between A100s under NCCL's own protocol choice; one
that moves along none is priced once); the floor is a
maximum over that time, so it is applied to the priced grid for every host time on its own grid. The loss is
the sum of squared log errors, each source weighing the same whatever its row count; a constant no remaining
entry depends on keeps its prior, and among grid pairs the remaining entries price alike the one nearest the
prior wins (a leave-one-regime-out fold must not move an unpinned constant to an end of its range). Collectives
across the trays of an NVLink domain that spans nodes (GB200 NVL72) fit none of them: they are predicted and
validated only (regime rack-scale-collectives).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from linkscope.hardware.loader import HardwareDB
from linkscope.model.comm.params import CommFit, comm_fit_override, packaged_comm_fit, with_nvls_fit
from linkscope.model.fidelity.evidence import CollectiveEntry, equal_source_weights
from linkscope.model.fidelity.evidence_predict import across_trays, measured, predicted
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
EFA_GRID_US = np.round(np.arange(10.0, 30.001, 0.5), 2)
"""10 to 30 us per EFA NET hop beyond InfiniBand: about half to one and a half times what aws-ofi-nccl's tuner
plans beyond NCCL's InfiniBand hop (20 - 2.7 us)."""
_GRID = [(float(o), float(c)) for o in OVERHEAD_GRID_US for c in SYNC_GRID_US]
_AMPERE_GRID = [(float(h), float(s)) for h in HOP_SCALE_GRID for s in LL_SHARE_GRID]
_EFA_GRID = [(float(v),) for v in EFA_GRID_US]
_NO_FLOOR_US = 1e-9
_Point = TypeVar("_Point", tuple[float], tuple[float, float])


class PricedCollectives:
    """Every collective entry's log error over the grids of constants; fits on any subset are then cheap."""

    def __init__(self, entries: list[CollectiveEntry], db: HardwareDB) -> None:
        self.entries = entries
        priced = [self._price(e, db) for e in entries]
        self.gpu_nvls = np.array([p[0] for p in priced])
        """(entries, NVLS pairs) log errors without the floor; constant along the pairs for other entries."""
        self.gpu_ampere = np.array([p[1] for p in priced])
        """(entries, A100 pairs) log errors without the floor; constant along the pairs for other entries."""
        self.gpu_efa = np.array([p[2] for p in priced])
        """(entries, EFA per-hop costs) log errors without the floor; constant along them for other entries."""
        self.on_ampere = np.array([p[3] == "ampere" for p in priced], dtype=bool)
        self.on_efa = np.array([p[3] == "efa" for p in priced], dtype=bool)
        self.floor = np.array([[_floor_log_error(e, float(h)) for h in HOST_GRID_US] for e in entries])
        self.is_time = np.array([e.metric == "time_us" for e in entries], dtype=bool)
        # Collectives across the trays of an NVLink domain (multi-node NVLink) do not fit: the constants are one
        # node's NVLS chunking and switch synchronisation, and NCCL runs NVLS across trays with other channel
        # counts and chunk rules, which they would absorb. Those entries test the rest (regime
        # rack-scale-collectives), as MoE runs do not fit the GEMM shares (fit.py).
        self.fits = np.array([not across_trays(e, db) for e in entries], dtype=bool)

    @staticmethod
    def _price(entry: CollectiveEntry, db: HardwareDB) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
        """The entry's log errors along each grid and the one grid it moves along ('nvls', 'ampere', 'efa' or
        '' for none). A row run with one protocol forced (`proto`) does not fit the EFA per-hop cost: on a
        Simple-only sweep the cost is paid twice per hop (the flush), so the row prices both together."""
        def log_error(pair: tuple[float, float], ampere: tuple[float, float] | None = None,
                      efa_us: float | None = None) -> float:
            with comm_fit_override(with_nvls_fit(*pair, call_host_us=_NO_FLOOR_US, ampere=ampere, efa_us=efa_us)):
                return float(np.log(predicted(entry, db) / measured(entry)))

        hop = (float(HOP_SCALE_GRID[0]), float(HOP_SCALE_GRID[-1]))
        share = (float(LL_SHARE_GRID[-1]), float(LL_SHARE_GRID[0]))
        neutral = (hop[0], share[0])
        base = log_error(_GRID[0], neutral)
        corners = [log_error(_GRID[-1], neutral), log_error((_GRID[0][0], _GRID[-1][1]), neutral)]
        a_corners = [log_error(_GRID[0], (h, sh)) for h in hop for sh in share if (h, sh) != neutral]
        e_corners = [log_error(_GRID[0], neutral, float(v)) for v in (EFA_GRID_US[0], EFA_GRID_US[-1])]
        moves = [name for name, moved in (("nvls", any(c != base for c in corners)),
                                          ("ampere", any(c != base for c in a_corners)),
                                          ("efa", entry.proto == "auto" and any(c != base for c in e_corners)))
                 if moved]
        if len(moves) > 1:
            raise ValueError(f"{entry.source} {entry.size_bytes} B moves along the {' and '.join(moves)} grids")
        on = moves[0] if moves else ""
        flat = (np.full(len(_GRID), base), np.full(len(_AMPERE_GRID), base), np.full(len(_EFA_GRID), base))
        if on == "nvls":
            return np.asarray([log_error(pair, neutral) for pair in _GRID]), flat[1], flat[2], on
        if on == "ampere":
            return flat[0], np.asarray([log_error(_GRID[0], a) for a in _AMPERE_GRID]), flat[2], on
        if on == "efa":
            return flat[0], flat[1], np.asarray([log_error(_GRID[0], neutral, v) for (v,) in _EFA_GRID]), on
        return (*flat, on)

    def _loss(self, gpu: np.ndarray, rows: np.ndarray, weight: np.ndarray) -> np.ndarray:
        """(grid, host) weighted squared log errors of `rows`, each time the larger of the GPUs' and the host's
        and each bandwidth the smaller."""
        g, f = gpu[rows][:, :, None], self.floor[rows][:, None, :]
        err = np.where(self.is_time[rows][:, None, None], np.maximum(g, f), np.minimum(g, f))
        return np.asarray((weight[:, None, None] * err**2).sum(axis=0))

    def fit(self, keep: Callable[[CollectiveEntry], bool] = lambda e: True) -> CommFit:
        """The constants fitted on the entries `keep` accepts (the priors where none depends on them)."""
        mask = np.array([keep(e) for e in self.entries], dtype=bool) & self.fits
        packaged = packaged_comm_fit()
        prior_pair = (packaged.prior_nvls_chunk_overhead_us, packaged.prior_nvls_sync_us)
        prior_ampere = (packaged.prior_ampere_nvlink_hop_scale, packaged.prior_ampere_ll_share)
        prior_host = packaged.prior_nccl_call_host_us
        prior_efa = (packaged.prior_efa_latency_us_extra,)
        if not mask.any():
            return with_nvls_fit(*prior_pair, call_host_us=prior_host, ampere=prior_ampere, efa_us=prior_efa[0])
        weight = np.array(equal_source_weights([e.source for e, m in zip(self.entries, mask) if m]))
        kept = np.flatnonzero(mask)
        a_rows, e_rows = self.on_ampere[kept], self.on_efa[kept]
        rest = ~a_rows & ~e_rows
        # No entry moves along two grids, so the loss separates: the A100 entries' part depends on the A100
        # pair and the host time, the EFA entries' on the per-hop cost and the host time, every other entry's on
        # the NVLS pair and the host time.
        loss_nvls = self._loss(self.gpu_nvls, kept[rest], weight[rest])
        loss_ampere = self._loss(self.gpu_ampere, kept[a_rows], weight[a_rows])
        loss_efa = self._loss(self.gpu_efa, kept[e_rows], weight[e_rows])
        if loss_nvls.size == 0:
            loss_nvls = np.zeros((len(_GRID), len(HOST_GRID_US)))
        if loss_ampere.size == 0:
            loss_ampere = np.zeros((len(_AMPERE_GRID), len(HOST_GRID_US)))
        if loss_efa.size == 0:
            loss_efa = np.zeros((len(_EFA_GRID), len(HOST_GRID_US)))
        total = loss_nvls.min(axis=0) + loss_ampere.min(axis=0) + loss_efa.min(axis=0)
        # Where the entries leave the host time free (every value up to some bound fits them equally), keep the
        # one nearest its prior rather than the grid's first.
        tied = np.flatnonzero(total <= total.min() + 1e-12)
        host_idx = int(tied[np.argmin(np.abs(HOST_GRID_US[tied] - prior_host))])
        pair = _nearest_prior(loss_nvls[:, host_idx], _GRID, prior_pair, (OVERHEAD_GRID_US, SYNC_GRID_US))
        ampere = _nearest_prior(loss_ampere[:, host_idx], _AMPERE_GRID, prior_ampere, (HOP_SCALE_GRID, LL_SHARE_GRID))
        efa = _nearest_prior(loss_efa[:, host_idx], _EFA_GRID, prior_efa, (EFA_GRID_US,))
        host = float(HOST_GRID_US[host_idx]) if np.ptp(total) >= 1e-12 else prior_host
        return with_nvls_fit(*pair, call_host_us=host, ampere=ampere, efa_us=efa[0])


def _nearest_prior(loss: np.ndarray, grid: list[_Point], prior: _Point,
                   axes: tuple[np.ndarray, ...]) -> _Point:
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
