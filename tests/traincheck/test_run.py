"""`bench train` end to end on two CPU ranks: the measurement, the store, the JSON document, calibration,
faults and bad input. Tiny models and few steps; no assertion on how fast anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from linkscope.bench.config import RunOptions
from linkscope.bench.faults import ENV_VAR
from linkscope.bench.recorder import EXIT_FAULT
from linkscope.bench.train.config import TrainConfig
from linkscope.cli.main import app
from linkscope.model.step.scaled import scaled_model
from linkscope.model.step.transformer import load_model
from linkscope.results.store import ResultStore
from linkscope.traincheck.session import TrainRequest, run_request

SMALL = ["--model", "llama2-7b", "--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "128",
         "--seq-len", "32"]
DOC_KEYS = {"run_id", "model", "ranks", "parallelism", "step_time_s", "step_time_s_stdev", "tokens_per_s",
            "tflops_per_rank", "mfu", "peak_memory_gib", "comm_s", "exposed_comm_s", "predicted", "error_pct"}


def _cfg(db: Path, **kw: object) -> TrainConfig:
    m = scaled_model(load_model("llama2-7b"), layers=1, hidden=64, heads=2, vocab=128, seq_len=32)
    base = dict(iters=3, warmup=1, profile_steps=0, run=RunOptions(nproc=2, db_path=str(db), quiet=True,
                                                                  timeout_s=60.0))
    return TrainConfig(model=m, **{**base, **kw})  # type: ignore[arg-type]


def _cli(args: list[str]) -> Result:
    return CliRunner().invoke(app, args)


def test_json_document_of_a_traced_ddp_run(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.db"
    result = _cli(["bench", "train", *SMALL, "-n", "3", "-w", "1", "--profile-steps", "2", "--db", str(db),
                   "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc.keys() >= DOC_KEYS
    assert doc["ranks"] == 2 and doc["parallelism"]["layout"] == "ddp" and doc["parallelism"]["dp"] == 2
    assert doc["steps"]["steps"] == 3 and doc["step_time_s"] > 0 and doc["tokens_per_s"] > 0
    assert doc["mfu"] is None  # CPU ranks have no datasheet peak
    assert doc["comm_s"]["all_reduce"] > 0 and 0 <= doc["exposed_comm_s"]["all_reduce"] <= doc["comm_s"]["all_reduce"]
    assert all(Path(p).is_file() for p in doc["trace"]["paths"])
    assert "USDT:" not in capfd.readouterr().err  # the ranks' stderr (inherited descriptors) stayed clean
    assert doc["predicted"] is None and doc["error_pct"] is None  # no calibration yet: nothing pretends
    with ResultStore(db) as store:
        info = store.get_run(doc["run_id"])
    assert info.kind == "train" and info.status == "complete"
    steps = info.extra["train"]["points"][0]["steps"]
    assert [s["step"] for s in steps] == [-1, 0, 1, 2]
    shown = _cli(["runs", "show", doc["run_id"], "--db", str(db)])
    assert shown.exit_code == 0 and "step time (s)" in shown.output and "all_reduce" in shown.output
    exported = _cli(["export", doc["run_id"], "--csv", "--db", str(db)])
    header, line = exported.stdout.strip().splitlines()
    assert header.startswith("label,status,model,ranks") and ",complete,llama2-7b-1l-64h,2,ddp," in line
    as_json = json.loads(_cli(["export", doc["run_id"], "--json", "--db", str(db)]).stdout)
    assert as_json["linkscope"]["extra"]["train_summary"]["points"][0]["run_id"] == doc["run_id"]


def test_calibrating_a_run_predicts_the_next_one(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    first = run_request(TrainRequest(_cfg(db)))
    assert first.result.exit_code == 0
    calibrated = _cli(["calibrate", first.result.run_id, "--name", "cpu-here", "--db", str(db), "--json"])
    assert calibrated.exit_code == 0, calibrated.output
    assert json.loads(calibrated.stdout)["train"]["coefficients"]["flops"] > 0
    second = run_request(TrainRequest(_cfg(db, micro_batch=3), system="profile:cpu-here"))
    doc = second.documents[0]
    assert doc["predicted"]["source"] == "profile cpu-here" and doc["predicted"]["step_time_s"] > 0
    expected = 100 * (doc["predicted"]["step_time_s"] - doc["step_time_s"]) / doc["step_time_s"]
    assert doc["error_pct"] == pytest.approx(expected)
    # The profile predicts CPU ranks of this host, so the model must be one the host can hold.
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("id: tiny\nlayers: 1\nhidden: 64\nheads: 2\nvocab: 128\nseq_len: 32\nsource: test\n"
                    "as_of: 2026-12-03\n")
    predicted = _cli(["predict", "train", "--system", "profile:cpu-here", "--model", str(tiny), "--global-batch", "4",
                      "--gpus", "2", "--json"])
    assert predicted.exit_code == 0, predicted.output
    assert json.loads(predicted.stdout)["step_time_s"] > 0


def test_sweep_names_a_winner_only_among_settings_that_train(tmp_path: Path) -> None:
    outcome = run_request(TrainRequest(_cfg(tmp_path / "r.db", iters=4), sweep="grad-compression=none,fp16"))
    verdict = outcome.sweep
    assert verdict is not None and verdict["baseline"] == "grad-compression=none"
    assert [r["setting"] for r in verdict["rows"]] == ["grad-compression=none", "grad-compression=fp16"]
    assert verdict["winner"] in {r["setting"] for r in verdict["rows"] if r["trains"]}
    assert len(outcome.documents) == 2 and outcome.result.status == "complete"
    assert isinstance(verdict["significant"], bool)


def test_a_win_within_the_noise_is_not_significant() -> None:
    from linkscope.traincheck.verdicts import beyond_noise

    base = {"step_time_s": 1.00, "step_time_s_stdev": 0.10, "steps": {"steps": 4}}
    close = {"step_time_s": 0.95, "step_time_s_stdev": 0.10, "steps": {"steps": 4}}
    far = {"step_time_s": 0.70, "step_time_s_stdev": 0.10, "steps": {"steps": 4}}
    assert not beyond_noise(close, base) and beyond_noise(far, base)


def test_a_rank_that_exits_ends_the_run_with_the_steps_so_far(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, json.dumps({"action": "exit", "rank": 1, "op": "train", "size": 3}))
    outcome = run_request(TrainRequest(_cfg(tmp_path / "r.db", iters=5)))
    result = outcome.result
    assert result.exit_code == EXIT_FAULT and result.status == "incomplete"
    assert "rank 1" in (result.error or "") and "step 3 of 5" in (result.error or "")
    with ResultStore(tmp_path / "r.db") as store:
        info = store.get_run(result.run_id)
    assert info.status == "incomplete"
    assert [s["step"] for s in info.extra["train"]["points"][0]["steps"]] == [-1, 0, 1]


def test_a_hung_rank_is_named_within_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, json.dumps({"action": "hang", "rank": 1, "op": "train", "size": 2}))
    cfg = _cfg(tmp_path / "r.db", iters=4)
    cfg.run.timeout_s = 10.0  # counted from when every rank is ready, never against start-up
    result = run_request(TrainRequest(cfg)).result
    assert result.exit_code == EXIT_FAULT and result.status == "incomplete"
    assert "rank 1 stopped making progress" in (result.error or "")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    cases = [(["--tp", "3"], "--tp: 3 does not divide the 2 ranks"),
             (["--grad-compression", "bf16"], "bf16_compress_hook runs on the nccl backend only"),
             (["--sweep", "lr=1,2"], "--sweep: expected KEY=V1,V2"),
             (["--scaling", "2,1"], "--scaling: expected at least two ascending"),
             (["--tp", "2", "--dp", "2", "--nproc", "2"], "--dp 2 x --tp 2 is 4 ranks, but --nproc is 2")]
    for extra, message in cases:
        result = _cli(["bench", "train", *SMALL, "--db", db, *extra])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output
    assert not ResultStore(Path(db)).list_runs()  # refused before any run was created


def test_a_model_that_cannot_fit_stops_before_allocating(tmp_path: Path) -> None:
    result = _cli(["bench", "train", "--model", "llama2-70b", "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 2
    assert "llama2-70b does not fit: predicted" in result.output and "GiB" in result.output


def test_fsdp_and_tensor_parallel_layouts_train_on_cpu_ranks(tmp_path: Path) -> None:
    from linkscope.bench.train.runner import TrainPlan, run_points
    from linkscope.bench.train.trace_comm import analyze

    m = scaled_model(load_model("llama2-7b"), layers=1, hidden=64, heads=2, vocab=128, seq_len=32)
    plans = [TrainPlan(name, TrainConfig(model=m, iters=2, warmup=1, profile_steps=2, **kw,  # type: ignore[arg-type]
                                         run=RunOptions(nproc=2, db_path=str(tmp_path / "r.db"), quiet=True)
                                         ).validated())
             for name, kw in (("fsdp", {"zero": 3}), ("tp", {"tp": 2}))]
    result = run_points(plans, emit=lambda line: None)
    assert result.exit_code == 0, result.error
    fsdp, tp = (analyze([Path(p) for p in point.trace_paths]) for point in result.points)
    assert {"all_gather", "reduce_scatter"} & fsdp.comm_s.keys()  # parameters gathered, gradients scattered
    assert tp.comm_s["all_reduce"] > 0  # the row-parallel layers' outputs
    assert all(len([s for s in p.steps if s["step"] >= 0]) == 2 for p in result.points)


@pytest.mark.timeout(900)
def test_tensor_parallel_inside_data_parallel_on_four_ranks(tmp_path: Path) -> None:
    from linkscope.model.calibration.profiles import new_profile, save_profile
    from linkscope.model.calibration.train_fit import TrainFit

    fit = TrainFit({"flops": 1e-9, "layer_passes": 0.0, "params": 0.0, "bus_bytes": 1e-8, "step": 1e-3}, 3, 0.1, 0.2)
    save_profile(new_profile("cpu-fit", "r0", 2, 1, "gloo", {}, None, None, "", train=fit.as_dict()))
    result = _cli(["bench", "train", *SMALL, "--tp", "2", "--dp", "2", "-n", "2", "-w", "1", "--profile-steps", "2",
                   "--system", "profile:cpu-fit", "--db", str(tmp_path / "r.db"), "--json", "--oversubscribe"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ranks"] == 4 and doc["tokens_per_step"] == 2 * 32 * 2  # two replicas' tokens
    assert {k: doc["parallelism"][k] for k in ("layout", "tp", "dp")} == {"layout": "tp+ddp", "tp": 2, "dp": 2}
    assert {k: doc["predicted"]["parallelism"][k] for k in ("tp", "dp")} == {"tp": 2, "dp": 2}
    assert doc["comm_s"]["all_reduce"] > 0 and len(doc["trace"]["ranks"]) == 4
