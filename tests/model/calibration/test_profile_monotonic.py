"""Calibrated profiles never predict a larger message as faster, and say so when extrapolating rank counts."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.model.calibration.calibrate import OpFit, Segment
from linkscope.model.calibration.profiles import new_profile, predict_from_profile

# The reported case: a latency-bound range ending at 32 KiB that lies far above the next range's line.
FIT = OpFit(op="all_reduce", ranks=8, nodes=1, median_error=0.0, max_error=0.0, points=10,
            segments=(Segment(alpha_us=2700.0, busbw_gb_per_s=50.0, upper_bytes=64 * 1024),
                      Segment(alpha_us=400.0, busbw_gb_per_s=100.0, upper_bytes=float("inf"))))


def test_profile_predictions_are_monotonic_in_size() -> None:
    sizes = [2**k for k in range(3, 34)]
    times = FIT.predict_us(sizes)
    assert np.all(np.diff(times) >= 0)
    assert times[sizes.index(64 * 1024)] >= times[sizes.index(32 * 1024)]


def test_monotonic_fix_keeps_each_range_on_its_own_sizes_when_consistent() -> None:
    fit = OpFit(op="all_reduce", ranks=8, nodes=1, median_error=0.0, max_error=0.0, points=10,
                segments=(Segment(5.0, 10.0, 4096.0), Segment(10.0, 100.0, float("inf"))))
    big = 2**30
    assert fit.predict_us([big])[0] == pytest.approx(fit.segments[1].time_us(np.asarray([big]), 1.75)[0])


def test_more_ranks_than_measured_warns_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    profile = new_profile("lab", "abcd", 8, 1, "nccl", {"all_reduce": FIT}, None, None, "")
    predict_from_profile(profile, "all_reduce", [1 << 20], gpus=64)
    err = capsys.readouterr().err
    assert "measured on 8 ranks" in err and "64" in err
    predict_from_profile(profile, "all_reduce", [1 << 20], gpus=8)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("content", [b"\xff\xfe\x81", b"[" * 5000 + b"]" * 5000, b'{"fits": 3}'])
def test_corrupt_profile_file_is_a_user_error(tmp_path, monkeypatch, content: bytes) -> None:
    from linkscope.hardware.errors import UserError
    from linkscope.model.calibration.profiles import load_profile

    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path))
    (tmp_path / "bad.json").write_bytes(content)
    with pytest.raises(UserError, match="not a valid profile|not a text file"):
        load_profile("bad")
