"""`bench train --lora R`: adapters on the synthetic decoder with the base frozen, under DDP, FSDP2 and TP on two
gloo CPU ranks."""

from __future__ import annotations

import operator
from typing import Any

import pytest

from linkscope.bench.train.config import TrainConfig
from linkscope.hardware.errors import UserError
from linkscope.model.step import peft as lora
from linkscope.model.step.scaled import scaled_model
from linkscope.model.step.transformer import load_model
from tests.bench.ranks import run_on_ranks

SLOW_START_S = 900
"""Two ranks each import torch on a shared 2-core machine: generous, never a tight bound."""
STEPS = 3


def _config(**kw: Any) -> TrainConfig:
    m = scaled_model(load_model("llama2-7b"), layers=1, hidden=64, heads=2, vocab=128, seq_len=16)
    return TrainConfig(model=m, micro_batch=2, profile_steps=0, cpu_threads=1, lr=1e-2,
                       **{"lora_rank": 4, **kw}).validated()


def _local(p: Any) -> list[float]:
    import torch
    from torch.distributed.tensor import DTensor

    full = p.full_tensor() if isinstance(p, DTensor) else p
    return full.detach().to(torch.float64).flatten().tolist()


def _train(ctx: Any, cfg: TrainConfig) -> dict[str, Any]:
    from linkscope.bench.train.loop import Trainer

    trainer = Trainer(cfg, ctx)
    base = getattr(trainer.wrapped.module, "module", trainer.wrapped.module)
    names = [n for n, _ in base.named_parameters()]
    before = {n: _local(operator.attrgetter(n)(base)) for n in names}
    losses = []
    for _ in range(STEPS):
        trainer.step()
        losses.append(trainer.last_loss)
    after = {n: _local(operator.attrgetter(n)(base)) for n in names}
    return {"losses": losses, "changed": sorted(n for n in names if before[n] != after[n]),
            "adapter": after["layers.0.attn.q_lora_a.weight"], "trainable": trainer.trainable_params,
            "params": trainer.params}


def _reference(cfg: TrainConfig) -> list[float]:
    """The same LoRA steps in one process, no torch.distributed: what tensor parallelism must reproduce."""
    import torch

    from linkscope.bench.train.lora import add_lora
    from linkscope.bench.train.loop import synthetic_batches
    from linkscope.bench.train.model import Decoder, loss_of

    torch.manual_seed(cfg.seed)
    model = Decoder(cfg.model)
    assert cfg.peft is not None
    add_lora(model, cfg.peft)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    batches = synthetic_batches(cfg, 0, torch.device("cpu"))
    losses = []
    for i in range(STEPS):
        batch = batches[i % len(batches)]
        loss = loss_of(model(batch[:, :-1]), batch[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.timeout(SLOW_START_S)
@pytest.mark.parametrize("layout", ["ddp", "fsdp", "tp"])
def test_only_the_adapters_train(layout: str) -> None:
    kw = {"ddp": {}, "fsdp": {"zero": 3}, "tp": {"tp": 2}}[layout]
    cfg = _config(**kw)
    results = run_on_ranks(_train, world=2, timeout_s=SLOW_START_S - 60, cfg=cfg)
    assert all(isinstance(r, dict) for r in results), results
    expected = lora.trainable_params(cfg.model, lora.Peft(rank=4))
    for r in results:
        # The base never changes; every adapter's B starts at zero and moves, and A moves once B is non-zero.
        assert r["changed"] and all("_lora_" in n for n in r["changed"]), r["changed"]
        assert r["trainable"] == expected and r["params"] > 30 * expected
    assert results[0]["adapter"] == pytest.approx(results[1]["adapter"], rel=1e-6)
    if layout == "tp":
        # Both tensor-parallel halves see the same tokens: the loss is the single-process run's.
        assert results[0]["losses"] == pytest.approx(_reference(cfg), rel=1e-4)


def test_bad_lora_values_name_the_flag() -> None:
    with pytest.raises(UserError, match="--lora"):
        _config(lora_rank=65)
    with pytest.raises(UserError, match="--lora-targets"):
        _config(lora_targets="mlp")
