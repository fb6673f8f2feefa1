"""The MoE layer of `bench train`: routing and weighting checked against a direct computation on one process, and a
real 2-rank expert-parallel run whose traces show the all-to-alls."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from typer.testing import CliRunner

from linkscope.bench.train.model import Decoder, expert_parameter_names, is_moe_layer
from linkscope.bench.train.moe import MoE
from linkscope.cli.main import app
from linkscope.model.step.scaled import scaled_model, with_experts
from linkscope.model.step.transformer import ModelConfig, load_model
from linkscope.report.train import point_lines

SMALL = ["--model", "llama2-7b", "--layers", "2", "--hidden", "64", "--heads", "2", "--vocab", "128",
         "--seq-len", "32"]


def _model(experts: int = 4, topk: int = 2) -> ModelConfig:
    return with_experts(scaled_model(load_model("llama2-7b"), layers=2, hidden=64, heads=2, vocab=128, seq_len=16),
                        experts, topk)


def test_one_rank_moe_is_the_weighted_sum_of_its_top_experts() -> None:
    torch.manual_seed(0)
    layer = MoE(_model(4, 2))
    x = torch.randn(3, 5, 64)
    got = layer(x)
    flat = x.reshape(-1, 64)
    probs = torch.softmax(layer.router(flat), dim=-1)
    weights, picked = probs.topk(2, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    want = torch.stack([sum(w * layer.experts[int(e)](row[None])[0] for w, e in zip(ws, es))
                        for row, ws, es in zip(flat, weights, picked)])
    assert torch.allclose(got.reshape(-1, 64), want, atol=1e-5)


def test_every_local_expert_is_in_the_graph_even_without_tokens() -> None:
    layer = MoE(_model(8, 1))
    layer(torch.randn(1, 1, 64)).sum().backward()  # one token reaches one expert
    assert all(p.grad is not None for p in layer.experts.parameters())


def test_the_decoder_places_moe_layers_and_names_the_experts_data_parallelism_must_skip() -> None:
    m = _model()
    assert [is_moe_layer(m, i) for i in range(m.layers)] == [True, True]
    assert expert_parameter_names(Decoder(m)) == []  # ep 1: every rank holds every expert, DDP averages them
    sharded = Decoder(m, ep=2, ep_rank=1)
    names = expert_parameter_names(sharded)
    assert names and all(".mlp.experts." in n for n in names)
    assert {n for n, _ in sharded.named_parameters()} >= set(names)
    assert len(sharded.layers[0].mlp.experts) == 2


def test_expert_parallel_training_on_two_ranks_shows_the_all_to_alls(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "train", *SMALL, "--experts", "4", "--topk", "2", "--ep", "2", "-n",
                                      "3", "-w", "1", "--profile-steps", "2", "--db", str(tmp_path / "r.db"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["parallelism"]["ep"] == 2 and doc["ranks"] == 2
    assert doc["comm_s"]["all_to_all"] > 0 and 0 <= doc["exposed_comm_s"]["all_to_all"] <= doc["comm_s"]["all_to_all"]
    assert math.isfinite(doc["loss"]["first"]) and math.isfinite(doc["loss"]["last"])
    lines = point_lines(doc)
    assert any(line.startswith("# exposed all-to-all per step (s): measured ") for line in lines)
    assert "ep=2" in lines[0]
