"""A training calibration on GPUs: the measured compute against the datasheet model's, used by `predict train
--system profile:NAME` and `advise train`.

No GPU runs here, so the run is made the way `bench train` stores one on GPU ranks (backend nccl, the probed
System of an 8 x H100 node, bf16 settings, each point's document as `bench train --json` emits it) by the same
functions, with step times chosen so that the compute takes 1.25 times what the model predicts and the trace
shows a known exposed communication."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from linkscope.advise.bookable import GpuRequest
from linkscope.advise.train import TrainRequest as AdviseRequest
from linkscope.advise.train import advise_train
from linkscope.bench.config import RunOptions
from linkscope.bench.runinfo import config_dict
from linkscope.bench.train.config import TrainConfig
from linkscope.bench.train.recorder import TrainPoint
from linkscope.bench.train.runner import TrainPlan, TrainRunResult
from linkscope.bench.train.trace_comm import CommSummary, TraceReport
from linkscope.cli.main import app
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import system_dict
from linkscope.model.calibration.profiles import load_profile, new_profile, save_profile
from linkscope.model.calibration.train_compute import COMM_KEYS, ComputeScale, profile_scale, scaled_compute
from linkscope.model.calibration.train_fit import TrainFit
from linkscope.model.step.predict import predict_train
from linkscope.model.step.scaled import scaled_model
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import load_model
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore
from linkscope.traincheck.document import point_document
from linkscope.traincheck.predict import predict_point
from linkscope.traincheck.session import _settings

OFFERING = "lambda/gpu_8x_h100_sxm5"
RATIO = 1.25
EXPOSED_S = 0.004
"""The traced exposed all-reduce per step (s), more than the model predicts (the ratio must not absorb it)."""


def _cfg() -> TrainConfig:
    m = scaled_model(load_model("llama2-7b"), layers=8, seq_len=2048)
    return TrainConfig(model=m, micro_batch=2, iters=4, warmup=1,
                       run=RunOptions(backend="nccl", nproc=8)).validated()


def _gpu_run(db_path: Path, ratio: float = RATIO) -> str:
    """Store a `bench train` run on 8 H100s as the GPU path writes it; the run id."""
    hw = load_db([])
    system = replace(hw.offerings[OFFERING].system, id="probe/gpu-host", origin="probe")
    cfg = _cfg()
    prediction, _ = predict_point(cfg, 8, "bf16", None, system_dict(system))
    assert prediction is not None
    comm_s = sum(prediction.breakdown[k] for k in COMM_KEYS)
    step_s = ratio * (prediction.step_time_s - comm_s) + EXPOSED_S
    settings = _settings(TrainPlan("", cfg, 8), 8, "bf16")
    # A warm-up step, then timed steps whose median is step_s.
    steps = [{"repeat": 0, "step": i - 1, "step_time_s": step_s * f, "loss": 10.0 - i}
             for i, f in enumerate((1.3, 0.99, 1.0, 1.01, 1.0))]
    point = TrainPoint("", 8, settings, {"params": 1, "precision": "bf16", "tokens_per_step": 2 * 2048 * 8},
                       steps, [{"mean_step_s": step_s, "peak_memory_gib": 30.0}] * 8, ["/gone/rank0.json"], 0.5,
                       "complete")
    ranks = [CommSummary(r, {"all_reduce": 0.01}, {"all_reduce": EXPOSED_S}, step_s, 60.0, 3, "") for r in range(8)]
    trace = TraceReport(ranks, {"all_reduce": 0.01}, {"all_reduce": EXPOSED_S}, 0, 0.0, "gpu")
    with ResultStore(db_path) as store:
        info = RunInfo(kind="train", label="", world_size=8, backend="nccl", versions={"torch": "2.13.0+cu128"},
                       nccl_env={}, system=system_dict(system), config=config_dict("train", cfg, 8), command="")
        run_id = store.create_run(info)
        result = TrainRunResult(run_id, db_path, "complete", 0, [point], backend="nccl", system=info.system)
        doc = point_document(result, point, prediction, trace)
        info.extra = {"train": {"points": [point.as_dict()]}, "train_summary": {"points": [doc]}}
        store.update_run(run_id, extra=info.extra)
        store.finish_run(run_id, "complete", None)
    return run_id


def _cli(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


def test_the_ratio_of_measured_to_predicted_compute_is_what_the_run_shows(tmp_path: Path) -> None:
    run_id = _gpu_run(tmp_path / "r.db")
    out = _cli(["calibrate", run_id, "--name", "h100-here", "--offering", OFFERING, "--db", str(tmp_path / "r.db"),
                "--json"])
    assert out.exit_code == 0, out.output
    stored = json.loads(out.stdout)["train_compute"]
    assert stored["compute_time_ratio"] == pytest.approx(RATIO, rel=1e-9)
    assert stored["gpu"] == "H100-SXM5-80GB" and stored["precision"] == "bf16"
    assert stored["points"][0]["comm_from"] == "trace"
    profile = load_profile("h100-here")
    assert profile.train is None and profile.offering == OFFERING and profile.system is not None
    text = _cli(["calibrate", run_id, "--name", "h100-here", "--db", str(tmp_path / "r.db")])
    assert "measured compute takes 1.25x the datasheet model's" in text.output


def test_predict_train_on_the_profile_scales_the_compute(tmp_path: Path) -> None:
    run_id = _gpu_run(tmp_path / "r.db")
    assert _cli(["calibrate", run_id, "--name", "h100-here", "--db", str(tmp_path / "r.db")]).exit_code == 0
    args = ["--model", "llama2-7b", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8", "--micro-batch", "1",
            "--global-batch", "64", "--zero", "1", "--recompute", "none", "--json"]
    catalog = _cli(["predict", "train", "--system", OFFERING, *args])
    measured = _cli(["predict", "train", "--system", "profile:h100-here", *args])
    assert catalog.exit_code == 0 and measured.exit_code == 0, measured.output
    before, after = json.loads(catalog.stdout), json.loads(measured.stdout)
    assert after["breakdown"]["compute_s"] == pytest.approx(RATIO * before["breakdown"]["compute_s"], rel=1e-9)
    assert after["breakdown"]["optimizer_s"] == pytest.approx(RATIO * before["breakdown"]["optimizer_s"], rel=1e-9)
    assert after["memory_gib_per_gpu"] == before["memory_gib_per_gpu"]
    assert any("compute time x1.25" in f and "profile h100-here" in f for f in after["flags"])


def test_predict_scaling_on_the_profile_scales_every_point(tmp_path: Path) -> None:
    run_id = _gpu_run(tmp_path / "r.db")
    assert _cli(["calibrate", run_id, "--name", "h100-here", "--db", str(tmp_path / "r.db")]).exit_code == 0
    args = ["--model", "llama2-7b", "--nodes", "2", "--tp", "1", "--pp", "1", "--json"]
    catalog = json.loads(_cli(["predict", "scaling", "--system", OFFERING, *args]).stdout)
    measured = json.loads(_cli(["predict", "scaling", "--system", "profile:h100-here", *args]).stdout)
    assert "compute time x1.25" in measured["note"]
    # The offering is one node only: its second row says so, with no figures, on both.
    assert [p["step_time_s"] is None for p in measured["points"]] == [False, True]
    for before, after in zip(catalog["points"][:1], measured["points"][:1]):
        assert after["step_time_s"] > before["step_time_s"]


def test_bench_train_on_the_profile_predicts_with_the_scale_and_prints_it(tmp_path: Path) -> None:
    from linkscope.report.train import point_lines

    run_id = _gpu_run(tmp_path / "r.db")
    assert _cli(["calibrate", run_id, "--name", "h100-here", "--db", str(tmp_path / "r.db")]).exit_code == 0
    on_profile, _ = predict_point(_cfg(), 8, "bf16", "profile:h100-here", None)
    on_catalog, _ = predict_point(_cfg(), 8, "bf16", OFFERING, None)
    assert on_profile is not None and on_catalog is not None
    assert on_profile.breakdown["compute_s"] == pytest.approx(RATIO * on_catalog.breakdown["compute_s"], rel=1e-9)
    with ResultStore(tmp_path / "r.db") as store:
        doc = store.get_run(run_id).extra["train_summary"]["points"][0]
    doc["predicted"] = {**doc["predicted"], "notes": on_profile.notes}
    assert [line for line in point_lines(doc) if "compute time x1.25" in line] == [f"#   {on_profile.notes[-1]}"]


def test_scaled_compute_leaves_the_packaged_constants_alone() -> None:
    hw = load_db([])
    system = hw.offerings[OFFERING].system
    job = Job(model=load_model("llama2-7b"), global_batch=64, seq_len=4096, precision="bf16")
    req = LayoutRequest(tp=1, pp=1, dp=8, cp=1, interleave=1, micro_batch=1, recompute="none", zero=1)
    base = predict_train(job, system, req)
    with scaled_compute(0.8):
        fast = predict_train(job, system, req)
    again = predict_train(job, system, req)
    assert fast.breakdown["compute_s"] == pytest.approx(0.8 * base.breakdown["compute_s"], rel=1e-9)
    assert again.step_time_s == base.step_time_s


def test_advise_uses_the_measured_compute_for_that_offering_and_says_so(tmp_path: Path) -> None:
    hw = load_db([])
    offering = hw.offerings[OFFERING]
    request = AdviseRequest(model=load_model("llama2-7b"), tokens=2e10, global_batch=256, seq_len=4096,
                            gpus=GpuRequest(gpus=8))
    before = advise_train(request, [offering]).rows[0]
    run_id = _gpu_run(tmp_path / "r.db")
    assert _cli(["calibrate", run_id, "--name", "h100-here", "--offering", OFFERING,
                 "--db", str(tmp_path / "r.db")]).exit_code == 0
    after = advise_train(request, [offering]).rows[0]
    assert after.measured_profile == "h100-here"
    assert any("compute time x1.25" in n for n in after.notes)
    assert (after.step_time_s or 0.0) > (before.step_time_s or 0.0)


def test_a_cpu_training_profile_in_advise_is_one_clear_line(tmp_path: Path) -> None:
    fit = TrainFit({"flops": 1e-10, "layer_passes": 0.0, "params": 0.0, "bus_bytes": 0.0, "step": 0.0}, 1, 0.0, 0.0)
    save_profile(new_profile("cpu-vm", "r0", 2, 1, "gloo", {}, None, OFFERING, "", train=fit.as_dict()))
    out = _cli(["advise", "train", "--model", "llama2-7b", "--tokens", "2e10", "--gpus", "8", "--provider", "lambda",
                "--json"])
    assert out.exit_code == 0 and "Traceback" not in out.output, out.output
    row = next(r for r in json.loads(out.stdout)["rows"] if r["offering"] == OFFERING)
    assert row["measured_profile"] is None
    assert [n for n in row["notes"] if "cpu-vm" in n] == [
        f"profile cpu-vm was fitted on gloo CPU ranks, which say nothing about {OFFERING}'s GPUs: catalog figures used"]
    text = _cli(["advise", "train", "--model", "llama2-7b", "--tokens", "2e10", "--gpus", "8", "--provider", "lambda"])
    assert text.exit_code == 0
    assert [line for line in text.output.splitlines() if "cpu-vm" in line] == [f"{OFFERING}: {row['notes'][0]}"]


def test_a_stored_ratio_that_cannot_be_used_is_refused() -> None:
    with pytest.raises(UserError, match="compute_time_ratio must be a positive number"):
        ComputeScale.from_dict({"compute_time_ratio": -1, "gpu": "H100", "precision": "bf16"}, "profile 'x'")
    profile = new_profile("x", "r", 8, 1, "nccl", {}, None, None, "", train_compute={"gpu": "H100"})
    with pytest.raises(UserError, match="not a valid GPU training calibration"):
        profile_scale(profile)


def test_a_run_faster_than_the_datasheet_peak_allows_is_not_saved(tmp_path: Path) -> None:
    # A third of the model's compute time would put the GEMMs above 100% of peak: a measurement problem.
    run_id = _gpu_run(tmp_path / "r.db", ratio=0.3)
    out = _cli(["calibrate", run_id, "--name", "too-fast", "--db", str(tmp_path / "r.db")])
    assert out.exit_code == 2
    assert "faster than the GPU's datasheet peak" in out.output and "Traceback" not in out.output
