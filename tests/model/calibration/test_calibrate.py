"""Fitting α–β curves to measured sweeps, and profiles used as --system profile:NAME."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.calibration.calibrate import fit_op, row_time_us
from linkscope.model.calibration.profiles import (calibrated_tiers, load_profile, new_profile, predict_from_profile,
                                                 profile_system, save_profile)
from linkscope.results.nccltests.json_format import parse_nccl_tests_json
from linkscope.results.records import CollectiveRow
from tests.cli.helpers import run_cli

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


FIXTURE = Path(__file__).parents[2] / "fixtures" / "bench" / "gloo_all_reduce_2rank_loopback.json"


def _fixture_rows(placement: str = "out_of_place") -> list[CollectiveRow]:
    parsed = parse_nccl_tests_json(json.loads(FIXTURE.read_text()), FIXTURE.name)
    return [r for r in parsed.rows if r.placement == placement]


def test_held_back_sizes_of_a_real_gloo_run_are_predicted_within_15_percent() -> None:
    rows = sorted(_fixture_rows(), key=lambda r: r.size_bytes)
    assert len(rows) >= 10 and all(len(r.times_us) == 5 for r in rows)
    fitted, held_back = rows[::2], rows[1::2]
    fit = fit_op("all_reduce", 2, 1, [r.size_bytes for r in fitted], [row_time_us(r) for r in fitted])
    predicted = fit.predict_us([r.size_bytes for r in held_back])
    for row, time_us in zip(held_back, predicted):
        measured = row_time_us(row)
        assert abs(time_us - measured) / measured <= 0.15, (row.size_bytes, time_us, measured)


def test_calibrate_a_stored_run_end_to_end(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path / "profiles"))
    db = str(tmp_path / "runs.db")
    imported = run_cli("import", "nccl-tests", str(FIXTURE), "--label", "loopback", "--db", db)
    assert imported.exit_code == 0, imported.stderr
    run_id = imported.stdout.split("imported run ")[1].split(":")[0]
    calibrated = run_cli("calibrate", run_id, "--name", "loopback", "--db", db, "--json")
    assert calibrated.exit_code == 0, calibrated.stderr
    report = json.loads(calibrated.stdout)
    assert report["profile"] == "loopback" and report["fits"]["all_reduce"]["median_error"] < 0.15
    predicted = run_cli("predict", "collective", "--system", "profile:loopback", "--bytes", "16M", "--json")
    measured = next(r for r in _fixture_rows() if r.size_bytes == 16 * 2**20)
    assert json.loads(predicted.stdout)["time_us"] == pytest.approx(float(np.median(measured.times_us)), rel=0.15)
    missing = run_cli("calibrate", "ffffffff", "--db", db)
    assert missing.exit_code == 2


def test_every_prediction_on_a_profile_uses_its_measured_tiers(tmp_path, monkeypatch) -> None:
    """`predict infer` on profile:NAME prices its TP all-reduces on the measured NVLink, like `predict train`."""
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path))
    db = load_db(include_user=False)
    slow = fit_op("all_reduce", 8, 1, SIZES, _alpha_beta(30.0, 15.0, 1.75))  # a tenth of DGX A100's NVLink
    save_profile(new_profile("slowlab", "abcd1234", 8, 1, "nccl", {"all_reduce": slow}, db.systems["dgx-a100"],
                             None, "lab run"))
    args = ["-m", "llama2-13b", "--tp", "8", "--json"]
    measured = json.loads(run_cli("predict", "infer", "-s", "profile:slowlab", *args).stdout)
    modelled = json.loads(run_cli("predict", "infer", "-s", "dgx-a100", *args).stdout)
    assert measured["tp_allreduce_share_decode"] > modelled["tp_allreduce_share_decode"]
