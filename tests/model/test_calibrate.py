"""Fitting α–β curves to measured sweeps, and profiles used as --system profile:NAME."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.calibrate import fit_op
from linkscope.model.collective_predict import predict_from_profile
from linkscope.model.profiles import calibrated_tiers, load_profile, new_profile, profile_system, save_profile

SIZES = [2**k for k in range(10, 27)]


def _alpha_beta(alpha_us: float, busbw: float, factor: float = 1.0) -> list[float]:
    return [alpha_us + s * factor / (busbw * 1e3) for s in SIZES]


def test_recovers_a_single_alpha_beta() -> None:
    fit = fit_op("broadcast", 2, 1, SIZES, _alpha_beta(25.0, 12.0))
    assert len(fit.segments) == 1
    assert fit.segments[0].alpha_us == pytest.approx(25.0, rel=1e-6)
    assert fit.peak_busbw_gb_per_s == pytest.approx(12.0, rel=1e-6)
    assert fit.max_error < 1e-9


def test_switching_protocols_give_several_ranges() -> None:
    # Like NCCL's LL (low latency, low bandwidth) and Simple (high latency, full bandwidth).
    times = [min(a, b) for a, b in zip(_alpha_beta(5.0, 2.0, 1.75), _alpha_beta(60.0, 200.0, 1.75))]
    fit = fit_op("all_reduce", 8, 1, SIZES, times)
    assert len(fit.segments) >= 2
    assert fit.max_error < 0.15
    assert fit.peak_busbw_gb_per_s == pytest.approx(200.0, rel=0.05)


def test_too_few_points_is_a_user_error() -> None:
    with pytest.raises(UserError, match="at least 3"):
        fit_op("all_reduce", 2, 1, [1024, 2048], [10.0, 11.0])


def test_profile_round_trip_and_predictions(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path))
    db = load_db(include_user=False)
    fit = fit_op("all_reduce", 8, 1, SIZES, _alpha_beta(30.0, 150.0, 1.75))
    profile = new_profile("lab", "abcd1234", 8, 1, "nccl", {"all_reduce": fit}, db.systems["dgx-a100"],
                          "azure/Standard_ND96amsr_A100_v4", "lab run")
    save_profile(profile)
    again = load_profile("lab")
    assert again.fits["all_reduce"] == fit and again.offering == "azure/Standard_ND96amsr_A100_v4"
    row = predict_from_profile(again, "all_reduce", [2**26])[0]
    assert row.busbw == pytest.approx(150.0 * (2**26 * 1.75 / 150e3) / (30 + 2**26 * 1.75 / 150e3), rel=1e-6)
    system = profile_system(again, db)
    assert system.id == "profile:lab" and system.node.gpu.id == "A100-SXM4-80GB"
    assert calibrated_tiers(again, system).nvlink_bw_gb_per_s == pytest.approx(150.0, rel=1e-6)
    with pytest.raises(UserError, match="no all_gather"):
        again.fit("all_gather")


def test_cpu_profiles_predict_collectives_only(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path))
    fit = fit_op("all_reduce", 2, 1, SIZES, _alpha_beta(40.0, 3.0))
    save_profile(new_profile("cpu", "ffff0000", 2, 1, "gloo", {"all_reduce": fit}, None, None, ""))
    with pytest.raises(UserError, match="collectives only"):
        profile_system(load_profile("cpu"), load_db(include_user=False))
    with pytest.raises(UserError, match="unknown profile"):
        load_profile("nope")
