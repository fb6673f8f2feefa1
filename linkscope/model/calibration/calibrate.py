"""Fit latency and bandwidth to a measured sweep: piecewise α–β per op, the way NCCL switches protocols.

Each op's sizes are split into up to three contiguous ranges; in each, time_us = alpha_us + size * factor /
(busbw * 1e3) is fitted by least squares on relative error (busbw in GB/s, nccl-tests' convention, so the
fitted bandwidth reads like nccl-tests' busbw column). A size is predicted with the range it falls in,
extrapolating with the first or last range outside the measured sizes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.results.busbw import bus_factors
from linkscope.results.records import CollectiveRow

MAX_SEGMENTS = 3
MIN_POINTS_PER_SEGMENT = 3
# A further segment must cut the squared relative error by this factor to be worth its two parameters,
# and is not tried once the fit is already within measurement noise (RMS relative error below 0.5%).
SEGMENT_GAIN = 0.7
GOOD_ENOUGH_RMS = 0.005


@dataclass(frozen=True)
class Segment:
    """α–β in one size range; `upper_bytes` is where the next range starts (inf for the last)."""

    alpha_us: float
    busbw_gb_per_s: float
    upper_bytes: float

    def time_us(self, size_bytes: np.ndarray, factor: float) -> np.ndarray:
        """Predicted time for sizes in this range."""
        return self.alpha_us + np.asarray(size_bytes, dtype=float) * factor / (self.busbw_gb_per_s * 1e3)


@dataclass(frozen=True)
class OpFit:
    """One op's fitted curve for the rank count and node count it was measured at."""

    op: str
    ranks: int
    nodes: int
    segments: tuple[Segment, ...]
    median_error: float
    max_error: float
    points: int

    def predict_us(self, size_bytes: np.ndarray | list[int], ranks: int | None = None) -> np.ndarray:
        """Time per size; another rank count rescales the latency by ring steps and keeps the bus bandwidth."""
        size = np.asarray(size_bytes, dtype=float)
        ranks = ranks or self.ranks
        factor = float(bus_factors(self.op, ranks))
        uppers = np.asarray([s.upper_bytes for s in self.segments])
        idx = np.searchsorted(uppers, size, side="right").clip(0, len(self.segments) - 1)
        out = np.zeros_like(size)
        steps = max(ranks - 1, 1) / max(self.ranks - 1, 1)
        # Segments are fitted independently, so one range's line can start below where the previous one ended
        # (2.7 ms at 32 KiB, 0.4 ms at 64 KiB). Moving more bytes never takes less time on the same ranks, so the
        # prediction at a size is the largest of every range's prediction at or below it: each earlier range is
        # evaluated at its own upper boundary (clipped), the size's own range at the size. The result is the
        # least monotonic non-decreasing curve that is at or above every fitted range on its own sizes.
        for k, seg in enumerate(self.segments):
            mask = idx >= k
            scaled = Segment(seg.alpha_us * steps, seg.busbw_gb_per_s, seg.upper_bytes)
            at = np.minimum(size[mask], seg.upper_bytes)
            out[mask] = np.maximum(out[mask], scaled.time_us(at, factor))
        return out

    @property
    def peak_busbw_gb_per_s(self) -> float:
        """Bus bandwidth of the largest-size range: the link rate the op reaches."""
        return self.segments[-1].busbw_gb_per_s


def _fit_segment(size: np.ndarray, time: np.ndarray, factor: float) -> tuple[float, float, float]:
    """(alpha_us, busbw, squared relative error) minimising relative error, with alpha >= 0 and busbw > 0."""
    weights = 1.0 / time
    a = np.stack([np.ones_like(size), size * factor], axis=1) * weights[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(size), rcond=None)
    if alpha < 0 or beta <= 0:
        alpha = max(alpha, 0.0)
        beta = max(float(np.median((time - alpha) / (size * factor))), 1e-12)
    resid = (alpha + beta * size * factor - time) / time
    return float(alpha), 1.0 / (beta * 1e3), float(np.sum(resid**2))


def _best_split(size: np.ndarray, time: np.ndarray, factor: float, segments: int) -> tuple[float, list[int]]:
    n = len(size)
    best: tuple[float, list[int]] = (math.inf, [])
    for cuts in itertools.combinations(range(MIN_POINTS_PER_SEGMENT, n - MIN_POINTS_PER_SEGMENT + 1),
                                       segments - 1):
        bounds = [0, *cuts, n]
        if any(b - a < MIN_POINTS_PER_SEGMENT for a, b in zip(bounds, bounds[1:])):
            continue
        err = sum(_fit_segment(size[a:b], time[a:b], factor)[2] for a, b in zip(bounds, bounds[1:]))
        if err < best[0]:
            best = (err, bounds)
    return best


def fit_op(op: str, ranks: int, nodes: int, sizes_bytes: list[int], times_us: list[float]) -> OpFit:
    """Fit one op's measured (size, time) points."""
    order = np.argsort(sizes_bytes)
    size = np.asarray(sizes_bytes, dtype=float)[order]
    time = np.asarray(times_us, dtype=float)[order]
    keep = (size > 0) & (time > 0)
    size, time = size[keep], time[keep]
    if len(size) < MIN_POINTS_PER_SEGMENT:
        raise UserError(f"{op}: {len(size)} usable sizes; at least {MIN_POINTS_PER_SEGMENT} are needed to fit")
    factor = float(bus_factors(op, ranks)) or 1.0
    err, bounds = _best_split(size, time, factor, 1)
    for k in range(2, MAX_SEGMENTS + 1):
        if len(size) < k * MIN_POINTS_PER_SEGMENT or math.sqrt(err / len(size)) < GOOD_ENOUGH_RMS:
            break
        err_k, bounds_k = _best_split(size, time, factor, k)
        if err_k < SEGMENT_GAIN * err:
            err, bounds = err_k, bounds_k
    return _assemble(op, ranks, nodes, size, time, factor, bounds)


def _assemble(op: str, ranks: int, nodes: int, size: np.ndarray, time: np.ndarray, factor: float,
              bounds: list[int]) -> OpFit:
    segments = []
    for a, b in zip(bounds, bounds[1:]):
        alpha, busbw, _ = _fit_segment(size[a:b], time[a:b], factor)
        upper = math.sqrt(size[b - 1] * size[b]) if b < len(size) else math.inf
        segments.append(Segment(alpha, busbw, upper))
    fit = OpFit(op, ranks, nodes, tuple(segments), 0.0, 0.0, len(size))
    errors = np.abs(fit.predict_us(size) - time) / time
    return OpFit(op, ranks, nodes, tuple(segments), float(np.median(errors)), float(np.max(errors)), len(size))


def fit_rows(rows: list[CollectiveRow], ranks: int, nodes: int,
             placement: str = "out_of_place") -> dict[str, OpFit]:
    """Fit every op of a stored run (one placement) measured on `ranks` ranks over `nodes` nodes."""
    by_op: dict[str, list[CollectiveRow]] = {}
    for row in rows:
        if row.placement == placement and row.time_us > 0:
            by_op.setdefault(row.op, []).append(row)
    if not by_op:
        raise UserError("the run has no measured rows to calibrate from")
    return {op: fit_op(op, op_rows[0].world_size or ranks, nodes, [r.size_bytes for r in op_rows],
                       [row_time_us(r) for r in op_rows]) for op, op_rows in by_op.items()}


def row_time_us(row: CollectiveRow) -> float:
    """The time to fit: the median over `--repeat` sweeps when there are several (one slow sweep on a busy
    machine should not bend the curve), else the row's time."""
    return float(np.median(row.times_us)) if len(row.times_us) > 1 else row.time_us
