"""A `bench kv` run fitted: the link's latency, what each page costs to post and the bandwidth, for a profile.

Each measured point moved `messages` pages of `bytes` in all between a pair in `seconds`; the model is the one the
disaggregated serving model prices a transfer with (`model.step.kv_transfer`): seconds = latency + messages x
per_message + bytes / bandwidth. The three coefficients are fitted by least squares on relative error, none
negative (a coefficient the data would make negative is held at 0 and the others refitted), so `bench kv
--system profile:NAME` predicts a run's points from the fit.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from linkscope.hardware.errors import UserError

MIN_POINTS = 3


@dataclass(frozen=True)
class KvFit:
    """The fitted link of one profile, and how well it fits its own points."""

    latency_us: float
    per_message_us: float
    gb_per_s: float
    median_error: float
    max_error: float
    points: int

    def predict_s(self, messages: float, nbytes: float) -> float:
        """Seconds for one pair to move `messages` pages of `nbytes` bytes in all."""
        return (self.latency_us + messages * self.per_message_us) * 1e-6 + nbytes / (self.gb_per_s * 1e9)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (a profile's `kv`)."""
        return asdict(self)

    @staticmethod
    def from_dict(data: Any, where: str) -> KvFit:
        """A profile's `kv`, every figure finite and in range (UserError naming the field)."""
        if not isinstance(data, dict):
            raise UserError(f"{where}: kv must be a mapping")
        values = {}
        for key in ("latency_us", "per_message_us", "gb_per_s", "median_error", "max_error", "points"):
            value = data.get(key)
            positive = key in ("gb_per_s", "points")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (positive and value <= 0):
                raise UserError(f"{where}: kv.{key} must be a finite number {'> 0' if positive else '>= 0'}, "
                                f"got {value!r}")
            values[key] = value
        return KvFit(float(values["latency_us"]), float(values["per_message_us"]), float(values["gb_per_s"]),
                     float(values["median_error"]), float(values["max_error"]), int(values["points"]))


def _solve(design: np.ndarray, keep: tuple[int, ...]) -> np.ndarray | None:
    coef = np.zeros(design.shape[1])
    if keep:
        sub, *_ = np.linalg.lstsq(design[:, keep], np.ones(design.shape[0]), rcond=None)
        coef[list(keep)] = sub
    return coef if np.all(coef >= 0) and coef[2] > 0 else None


def fit_kv(messages: list[float], nbytes: list[float], seconds: list[float]) -> KvFit:
    """The non-negative fit of seconds = latency + messages x per_message + bytes / bandwidth, on relative error."""
    t = np.asarray(seconds, dtype=float)
    keep_rows = np.isfinite(t) & (t > 0)
    if int(keep_rows.sum()) < MIN_POINTS:
        raise UserError(f"the run has {int(keep_rows.sum())} timed points; at least {MIN_POINTS} (block sizes x "
                        "in-flight counts) are needed to fit latency, per-page cost and bandwidth")
    n, b, t = (np.asarray(messages, float)[keep_rows], np.asarray(nbytes, float)[keep_rows], t[keep_rows])
    design = np.stack([np.ones_like(t), n, b], axis=1) / t[:, None]
    best: tuple[float, np.ndarray] | None = None
    for size in (3, 2, 1):
        for keep in itertools.combinations(range(3), size):
            coef = _solve(design, keep)
            if coef is None:
                continue
            err = float(np.sum((design @ coef - 1.0) ** 2))
            if best is None or err < best[0]:
                best = (err, coef)
    if best is None:
        raise UserError("the run's points do not separate the bandwidth (times do not grow with bytes); sweep "
                        "larger --block-tokens or more --in-flight")
    alpha, per_message, per_byte = best[1]
    errors = np.abs(design @ best[1] - 1.0)
    return KvFit(alpha * 1e6, per_message * 1e6, 1.0 / per_byte / 1e9, float(np.median(errors)),
                 float(np.max(errors)), int(len(t)))
