"""The KV link fitted from `bench kv` points: coefficients recovered, none negative, hostile profiles refused."""

from __future__ import annotations

import math

import pytest

from linkscope.hardware.errors import UserError
from linkscope.model.calibration.kv_fit import KvFit, fit_kv


def _points(latency_us: float, per_message_us: float, gb_per_s: float) -> tuple[list[float], list[float], list[float]]:
    messages = [16, 64, 128, 512, 4, 32]
    nbytes = [64e6, 64e6, 256e6, 256e6, 16e6, 512e6]
    seconds = [(latency_us + m * per_message_us) * 1e-6 + b / (gb_per_s * 1e9) for m, b in zip(messages, nbytes)]
    return messages, nbytes, seconds


def test_exact_points_give_back_their_coefficients() -> None:
    fit = fit_kv(*_points(30.0, 2.0, 40.0))
    assert fit.latency_us == pytest.approx(30.0, rel=1e-6)
    assert fit.per_message_us == pytest.approx(2.0, rel=1e-6)
    assert fit.gb_per_s == pytest.approx(40.0, rel=1e-6)
    assert fit.median_error < 1e-9 and fit.points == 6
    assert fit.predict_s(100, 1e9) == pytest.approx((30.0 + 200.0) * 1e-6 + 1e9 / 40e9)


def test_a_coefficient_the_data_would_make_negative_is_held_at_zero() -> None:
    messages, nbytes, seconds = _points(0.0, 0.0, 10.0)
    seconds = [s * (0.98 if m > 100 else 1.0) for s, m in zip(seconds, messages)]  # more pages, less time
    fit = fit_kv(messages, nbytes, seconds)
    assert fit.per_message_us >= 0 and fit.latency_us >= 0 and fit.gb_per_s > 0


def test_too_few_points_are_refused() -> None:
    with pytest.raises(UserError, match="at least 3"):
        fit_kv([1, 2], [1e6, 2e6], [0.1, 0.2])


@pytest.mark.parametrize("bad", [
    {"latency_us": math.nan}, {"gb_per_s": 0}, {"per_message_us": -1}, {"points": True}, {"median_error": "x"},
])
def test_a_hostile_profile_field_is_one_line(bad: dict) -> None:
    good = KvFit(1.0, 0.1, 10.0, 0.01, 0.02, 4).as_dict()
    with pytest.raises(UserError, match="kv\\."):
        KvFit.from_dict({**good, **bad}, "profile 'p'")
    with pytest.raises(UserError, match="mapping"):
        KvFit.from_dict([1, 2], "profile 'p'")
