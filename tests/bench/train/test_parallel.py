"""Tensor parallelism inside data parallelism on four gloo CPU ranks: a 2-D mesh (dp, tp), tp innermost.

Ranks 0 and 1 are the two tensor-parallel halves of data-parallel replica 0, ranks 2 and 3 of replica 1. The
replicas read different tokens, so their weights stay equal only if the gradients are averaged over dp."""

from __future__ import annotations

from typing import Any

import pytest

from linkscope.bench.train.config import TrainConfig
from linkscope.model.step.scaled import scaled_model
from linkscope.model.step.transformer import load_model
from tests.bench.ranks import run_on_ranks

SLOW_START_S = 900
"""Four ranks each import torch on a shared 2-core machine: generous, never a tight bound."""


def _config(**kw: Any) -> TrainConfig:
    m = scaled_model(load_model("llama2-7b"), layers=1, hidden=64, heads=2, vocab=128, seq_len=16)
    return TrainConfig(model=m, micro_batch=2, tp=2, profile_steps=0, cpu_threads=1, **kw).validated()


def _train_and_report(ctx: Any, cfg: TrainConfig, steps: int) -> dict[str, Any]:
    import operator

    import torch
    from torch.distributed.tensor import DTensor

    from linkscope.bench.train.loop import Trainer
    from linkscope.bench.train.model import Decoder

    trainer = Trainer(cfg, ctx)
    losses = []
    for _ in range(steps):
        trainer.step()
        losses.append(trainer.last_loss)
    base = getattr(trainer.wrapped.module, "module", trainer.wrapped.module)
    weights = {}
    # By attribute: once DDP has localised the tensor-parallel parameters, the module lists them no more.
    for name, _ in Decoder(cfg.model).named_parameters():
        p = operator.attrgetter(name)(base)
        local = p.to_local() if isinstance(p, DTensor) else p
        weights[name] = local.detach().to(torch.float64).flatten().tolist()
    return {"data_rank": trainer.wrapped.data_rank, "data_ranks": trainer.wrapped.data_ranks, "losses": losses,
            "weights": weights}


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= 1e-6 * (1 + abs(x)) for x, y in zip(a, b))


@pytest.mark.timeout(SLOW_START_S)
@pytest.mark.parametrize("zero", [0, 3], ids=["tp+ddp", "tp+fsdp"])
def test_tp_groups_are_data_parallel_replicas(zero: int) -> None:
    results = run_on_ranks(_train_and_report, world=4, timeout_s=SLOW_START_S - 60, cfg=_config(zero=zero), steps=3)
    assert all(isinstance(r, dict) for r in results), results
    assert [(r["data_rank"], r["data_ranks"]) for r in results] == [(0, 2), (0, 2), (1, 2), (1, 2)]
    # Different tokens per replica, the same within a tensor-parallel group.
    assert results[0]["losses"] == results[1]["losses"] and results[0]["losses"] != results[2]["losses"]
    q = "layers.0.attn.q.weight"
    if zero == 0:
        # DDP over dp: every replica holds the same weights, each tp rank its own half of the projections.
        for a, b in ((0, 2), (1, 3)):
            assert all(_close(results[a]["weights"][n], results[b]["weights"][n]) for n in results[a]["weights"])
        assert len(results[0]["weights"][q]) == 64 * 64 // 2
        assert not _close(results[0]["weights"][q], results[1]["weights"][q])
    else:
        # FSDP2 over dp shards each tp half once more: a quarter of the projection per rank.
        assert len(results[0]["weights"][q]) == 64 * 64 // 4
