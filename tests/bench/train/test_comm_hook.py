"""`bench train --comm-hook`: PyTorch's DDP communication hooks run for real on two gloo CPU ranks, and a hook
the backend cannot run is one line naming what is missing."""

from __future__ import annotations

import math
from typing import Any

import pytest

from linkscope.bench.train.config import TrainConfig, missing_hook, parse_comm_hook
from linkscope.hardware.errors import UserError
from linkscope.model.step.scaled import scaled_model
from linkscope.model.step.transformer import load_model
from tests.bench.ranks import run_on_ranks

SLOW_START_S = 600
"""Two ranks each import torch on a shared 2-core machine: generous, never a tight bound."""


def _config(**kw: Any) -> TrainConfig:
    m = scaled_model(load_model("llama2-7b"), layers=1, hidden=64, heads=2, vocab=128, seq_len=16)
    return TrainConfig(model=m, micro_batch=2, profile_steps=0, cpu_threads=1, **kw).validated()


def _train(ctx: Any, cfg: TrainConfig, steps: int) -> dict[str, Any]:
    from linkscope.bench.train.loop import Trainer

    trainer = Trainer(cfg, ctx)
    losses = []
    for _ in range(steps):
        trainer.step()
        losses.append(trainer.last_loss)
    ddp: Any = trainer.wrapped.module
    weights = [float(v) for p in ddp.parameters() for v in p.detach().flatten()[:8].tolist()]
    return {"losses": losses, "weights": weights, "hook": ddp._get_ddp_logging_data().get("comm_hook", "")}


def test_parse_comm_hook() -> None:
    assert parse_comm_hook("fp16") == ("fp16", 1)
    assert parse_comm_hook("powersgd:4") == ("powersgd", 4)
    for bad in ("topk", "fp16:2", "powersgd:x"):
        with pytest.raises(UserError):
            parse_comm_hook(bad)


def test_a_hook_the_backend_cannot_run_is_named() -> None:
    problem = missing_hook("powersgd", "gloo", gradient_mb=80.0, bucket_mb=25.0)
    assert problem is not None and "--bucket-mb 80" in problem and "NCCL" in problem
    assert missing_hook("powersgd", "gloo", gradient_mb=10.0, bucket_mb=25.0) is None
    assert missing_hook("fp16", "gloo") is None
    assert "nccl backend only" in (missing_hook("bf16", "gloo") or "")


def test_powersgd_rank_above_the_model_is_refused() -> None:
    with pytest.raises(UserError, match="above the smallest matrix dimension 64"):
        _config(grad_compression="powersgd", powersgd_rank=65)


@pytest.mark.timeout(SLOW_START_S)
def test_powersgd_hook_trains_on_two_gloo_ranks() -> None:
    # One bucket (gloo cannot order PowerSGD's per-bucket all-reduces); compression starts at step 3.
    cfg = _config(grad_compression="powersgd", powersgd_rank=2, bucket_mb=100.0)
    results = run_on_ranks(_train, world=2, timeout_s=SLOW_START_S - 60, cfg=cfg, steps=4)
    assert all(isinstance(r, dict) for r in results), results
    assert all(r["hook"] == "powerSGD_hook" for r in results)
    assert all(math.isfinite(x) for r in results for x in r["losses"])
    # The hook averages the compressed gradients over both ranks: the replicas stay equal.
    assert results[0]["weights"] == pytest.approx(results[1]["weights"], rel=1e-6, abs=1e-7)


def test_the_prediction_beside_a_hook_prices_the_same_hook() -> None:
    from linkscope.model.step.knobs import Knobs
    from linkscope.traincheck.predict import measured_knobs, predict_point

    assert measured_knobs(_config()) == Knobs()
    cfg = _config(grad_compression="powersgd", powersgd_rank=2, bucket_mb=100.0)
    # A 100 MB bucket holds the whole tiny model: one bucket, its gradients' size.
    one_bucket = measured_knobs(cfg)
    assert one_bucket.compression == "powersgd" and one_bucket.powersgd_rank == 2
    assert one_bucket.bucket_mb == pytest.approx(cfg.model.total_params() * 2 / 2**20)
    hooked, _ = predict_point(cfg, 2, "bf16", "dgx-a100", None)
    plain, _ = predict_point(_config(bucket_mb=100.0), 2, "bf16", "dgx-a100", None)
    assert hooked is not None and plain is not None
    assert hooked.breakdown["knob_compute_s"] > 0 == plain.breakdown["knob_compute_s"]
    assert any("changes the optimisation" in note for note in hooked.notes)


def test_a_fitted_cpu_profile_says_it_prices_no_hook() -> None:
    # The CPU fit has no compression term: the number beside a hooked run is the plain step's, and says so.
    from linkscope.model.calibration.train_fit import TrainFit
    from linkscope.traincheck.predict import _on_fit

    fit = TrainFit(coefficients={"flops": 1e-11, "step": 0.01}, points=3, median_error=0.0, max_error=0.0)
    hooked = _on_fit(_config(grad_compression="fp16"), 2, "fp32", "cpu", fit)
    plain = _on_fit(_config(), 2, "fp32", "cpu", fit)
    assert hooked.step_time_s == plain.step_time_s
    assert hooked.notes == ["the fitted profile has no compression term: fp16 is priced as no hook"]
    assert plain.notes == []
