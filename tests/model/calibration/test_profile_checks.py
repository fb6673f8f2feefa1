"""A profile is checked when written and read: no prediction starts from NaN, infinity, zero or a negative
figure, a CPU profile never stands in for a GPU offering, and a CPU training profile predicts CPU ranks only."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from linkscope.cli.main import app
from linkscope.hardware.errors import UserError
from linkscope.model.calibration.calibrate import OpFit, Segment
from linkscope.model.calibration.profiles import ProfileWarning, load_profile, new_profile, save_profile
from linkscope.model.calibration.train_fit import TrainFit
from linkscope.model.step.transformer import load_model
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore

GOOD_FIT = OpFit("all_reduce", 2, 1, (Segment(30.0, 1.5, float("inf")),), 0.01, 0.02, 8)
GOOD_TRAIN = TrainFit({"flops": 1.6e-10, "layer_passes": 0.0, "params": 0.0, "bus_bytes": 2.8e-8, "step": 0.0},
                      2, 0.0, 0.0)


@pytest.fixture(autouse=True)
def _profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path / "profiles"))
    return tmp_path / "profiles"


def _cli(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize("alpha, busbw", [(30.0, 0.0), (30.0, -1.0), (30.0, math.nan), (30.0, math.inf),
                                          (-5.0, 1.5), (math.nan, 1.5)])
def test_a_fit_with_a_coefficient_out_of_range_is_not_written(alpha: float, busbw: float) -> None:
    bad = OpFit("all_reduce", 2, 1, (Segment(alpha, busbw, float("inf")),), 0.01, 0.02, 8)
    with pytest.raises(UserError, match="profile 'bad': all_reduce segment 0 (alpha_us|busbw_gb_per_s) must be"):
        save_profile(new_profile("bad", "r", 2, 1, "gloo", {"all_reduce": bad}, None, None, ""))


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["fits"]["all_reduce"]["segments"][0].update(busbw_gb_per_s=0), "busbw_gb_per_s"),
    (lambda d: d["fits"]["all_reduce"]["segments"][0].update(alpha_us=-3), "alpha_us"),
    (lambda d: d["fits"]["all_reduce"]["segments"][0].update(busbw_gb_per_s="fast"), "busbw_gb_per_s"),
    (lambda d: d["fits"]["all_reduce"]["segments"].insert(0, {"alpha_us": 1, "busbw_gb_per_s": 1,
                                                              "upper_bytes": None}), "upper_bytes"),
    (lambda d: d["fits"]["all_reduce"].update(segments=[]), "no fitted segments"),
    (lambda d: d.update(ranks=0), "ranks must be"),
    (lambda d: d["train"]["coefficients"].update(flops=-1e-10), "train coefficient flops"),
    (lambda d: d["train"]["coefficients"].update(flops=None), "train coefficient flops"),
    (lambda d: d["train"].update(coefficients={k: 0.0 for k in d["train"]["coefficients"]}), "every train"),
    (lambda d: d["train"].update(coefficients={}), "train.coefficients is missing"),
])
def test_a_hand_edited_profile_is_refused_on_read_naming_the_field(_profiles: Path, edit: Any, field: str) -> None:
    path = save_profile(new_profile("p", "r", 2, 1, "gloo", {"all_reduce": GOOD_FIT}, None, None, "",
                                    train=GOOD_TRAIN.as_dict()))
    data = json.loads(path.read_text())
    edit(data)
    # JSON has no NaN in strict form, so write what a hand edit or another tool could leave.
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match=field):
        load_profile("p")
    for args in (["predict", "collective", "--system", "profile:p", "-B", "4K"],
                 ["predict", "train", "--system", "profile:p", "-m", "llama2-7b"]):
        out = _cli(args)
        assert out.exit_code == 2 and "Traceback" not in out.output
        assert "profile 'p'" in out.output and field.split()[0] in out.output


def test_infinite_coefficients_in_the_file_are_refused(_profiles: Path) -> None:
    path = save_profile(new_profile("p", "r", 2, 1, "gloo", {"all_reduce": GOOD_FIT}, None, None, ""))
    path.write_text(path.read_text().replace('"busbw_gb_per_s": 1.5', '"busbw_gb_per_s": Infinity'))
    with pytest.raises(UserError, match="busbw_gb_per_s must be a finite number > 0, got inf"):
        load_profile("p")


def test_the_readme_profile_suggestion_refuses_a_model_the_host_cannot_hold() -> None:
    save_profile(new_profile("cpu-vm", "r", 2, 1, "gloo", {}, None, None, "", train=GOOD_TRAIN.as_dict()))
    out = _cli(["predict", "train", "--system", "profile:cpu-vm", "-m", "llama2-70b"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "llama2-70b does not fit the CPU ranks profile 'cpu-vm' predicts" in out.output
    assert "GiB available" in out.output


def test_a_model_the_host_holds_gets_cpu_figures_without_nonsense(tmp_path: Path) -> None:
    save_profile(new_profile("cpu-vm", "r", 2, 1, "gloo", {}, None, None, "", train=GOOD_TRAIN.as_dict()))
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("id: tiny\nlayers: 2\nhidden: 128\nheads: 4\nvocab: 512\nseq_len: 64\nsource: test\n"
                    "as_of: 2026-12-03\n")
    out = _cli(["predict", "train", "--system", "profile:cpu-vm", "-m", str(tiny), "--global-batch", "8"])
    assert out.exit_code == 0, out.output
    assert "2 CPU ranks" in out.output and "memory per CPU rank" in out.output and "CPU ranks only" in out.output
    for nonsense in ("of 0 (fits)", " 0 ()", "(, p10..p90)", "0.0 GiB", "nan", "inf"):
        assert nonsense not in out.output
    doc = json.loads(_cli(["predict", "train", "--system", "profile:cpu-vm", "-m", str(tiny), "--global-batch", "8",
                           "--json"]).stdout)
    assert doc["rank_kind"] == "CPU rank" and doc["step_time_s"] > 0 and doc["memory_gib_available"] > 0


def test_a_profile_prediction_defaults_to_the_step_bench_train_measured(tmp_path: Path) -> None:
    # Without --global-batch the profile's own kind of step (2 sequences per rank, no accumulation), not the
    # ~4M tokens of a pre-training job on each CPU rank.
    save_profile(new_profile("cpu-vm", "r", 2, 1, "gloo", {}, None, None, "", train=GOOD_TRAIN.as_dict()))
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("id: tiny\nlayers: 2\nhidden: 128\nheads: 4\nvocab: 512\nseq_len: 64\nsource: test\n"
                    "as_of: 2026-12-03\n")
    out = _cli(["predict", "train", "--system", "profile:cpu-vm", "-m", str(tiny), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["global_batch"] == 2 * 2
    # Full training on a profile: every parameter of the model trains.
    params = load_model(str(tiny)).total_params()
    assert doc["total_params"] == doc["trainable_params"] == params > 0 and doc["frozen_params"] == 0
    text = _cli(["predict", "train", "--system", "profile:cpu-vm", "-m", str(tiny)]).stdout
    assert "0.0 B" not in text and f"{params / 1e3:.1f} K" in text


def _stored_run(db: Path, backend: str) -> str:
    with ResultStore(db) as store:
        info = RunInfo(kind="bench", label="", world_size=2, backend=backend, versions={}, nccl_env={}, system=None,
                       config={}, command="")
        run_id = store.create_run(info)
        store.finish_run(run_id, "complete", None)
    return run_id


def test_a_cpu_run_cannot_be_calibrated_for_a_gpu_offering(tmp_path: Path, _profiles: Path) -> None:
    run_id = _stored_run(tmp_path / "r.db", "gloo")
    out = _cli(["calibrate", run_id, "--offering", "aws/p5.48xlarge", "--db", str(tmp_path / "r.db")])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "measured on gloo (CPU) ranks" in out.output and "aws/p5.48xlarge" in out.output
    assert not _profiles.exists() or not list(_profiles.iterdir())


def test_check_expect_takes_a_gpu_profile_and_names_its_own_flag() -> None:
    from linkscope.check.run import expected_system
    from linkscope.hardware.loader import load_db

    db = load_db(include_user=False)
    fit = OpFit("all_reduce", 8, 1, (Segment(30.0, 150.0, float("inf")),), 0.01, 0.02, 8)
    save_profile(new_profile("lab", "r", 8, 1, "nccl", {"all_reduce": fit}, db.systems["dgx-a100"], None, ""))
    assert expected_system("profile:lab").id == "profile:lab"
    save_profile(new_profile("cpu-vm", "r", 2, 1, "gloo", {}, None, None, "", train=GOOD_TRAIN.as_dict()))
    for spec, why in (("profile:cpu-vm", "without a GPU System"), ("profile:nope", "unknown profile 'nope'"),
                      ("nonsense", "unknown System 'nonsense'")):
        out = _cli(["check", "--expect", spec])
        assert out.exit_code == 2 and out.output.startswith("error: --expect: ") and why in out.output, out.output


def test_an_imported_gpu_run_can_still_be_calibrated_for_its_offering(tmp_path: Path) -> None:
    from linkscope.model.calibration.calibrate_run import GPU_BACKENDS

    assert "nccl-tests" in GPU_BACKENDS  # imported nccl-tests output was measured on GPUs


def test_an_older_gloo_profile_naming_an_offering_leaves_the_catalog_figures() -> None:
    from linkscope.hardware.loader import load_db
    from linkscope.model.calibration.systems import resolve_offering

    offering = load_db(include_user=False).offerings["aws/p5.48xlarge"]
    save_profile(new_profile("loopback", "r", 2, 1, "gloo", {"all_reduce": GOOD_FIT}, None, offering.id, ""))
    resolved = resolve_offering(offering)
    assert resolved.profile is None and "catalog figures used" in resolved.notes[0]


def _saved(folder: Path, name: str, **changes: Any) -> Path:
    good = new_profile(name, "r1", 2, 1, "gloo", {"all_reduce": GOOD_FIT}, None, "aws/p5.48xlarge", "")
    save_profile(good)
    path = folder / f"{name}.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("changes", [{"train": "banana"}, {"system": [1, 2]}, {"kv": 3}, {"fits": []},
                                     {"train_compute": {"compute_time_ratio": 1e308, "gpu": "H100",
                                                        "precision": "bf16"}},
                                     {"fits": {"all_reduce": {"op": "all_reduce", "ranks": 2, "nodes": 1,
                                               "segments": [{"alpha_us": 1e308, "busbw_gb_per_s": 1.5,
                                                             "upper_bytes": None}],
                                               "median_error": 0.0, "max_error": 0.0, "points": 8}}}])
def test_one_bad_profile_is_one_warning_and_every_offering_command_works(_profiles: Path,
                                                                         changes: dict[str, Any]) -> None:
    bad = _saved(_profiles, "bad", **changes)
    with pytest.raises(UserError, match="bad"):
        load_profile("bad")
    for args in (["predict", "collective", "-s", "aws/p5.48xlarge"], ["profiles"],
                 ["predict", "train", "-s", "aws/p5.48xlarge", "-m", "llama2-7b"]):
        with pytest.warns(ProfileWarning) as record:
            result = _cli(args)
        assert result.exit_code == 0, (args, result.output)
        messages = {str(w.message) for w in record if isinstance(w.message, ProfileWarning)}
        assert len(messages) == 1 and str(bad) in messages.pop()


def test_a_bad_profile_is_one_stderr_line_of_a_real_command(_profiles: Path) -> None:
    import subprocess
    import sys

    bad = _saved(_profiles, "bad", train="banana")
    done = subprocess.run([sys.executable, "-m", "linkscope", "predict", "train", "-s", "aws/p5.48xlarge", "-m",
                           "llama2-7b"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning: profile")]
    assert len(warned) == 1 and str(bad) in warned[0]


def test_a_fifo_in_the_profile_directory_is_left_out_without_blocking(_profiles: Path) -> None:
    import os

    _profiles.mkdir(parents=True)
    os.mkfifo(_profiles / "pipe.json")
    with pytest.warns(ProfileWarning, match="pipe.json: not a regular file"):
        result = _cli(["profiles"])
    assert result.exit_code == 0
