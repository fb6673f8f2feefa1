"""LoRA fine-tuning: adapter counts, a frozen base in memory, compute and communication, and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.step import peft as lora
from linkscope.model.step.job import Job
from linkscope.model.step.layout import single_layout
from linkscope.model.step.memory import GIB
from linkscope.model.step.predict import predict_train
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import model_presets
from tests.cli.helpers import run_cli

LLAMA70 = model_presets()["llama2-70b"]


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def _jobs(peft: lora.Peft, batch: int = 8, seq: int = 4096) -> tuple[Job, Job]:
    full = Job(model=LLAMA70, global_batch=batch, seq_len=seq)
    return full, Job(model=LLAMA70, global_batch=batch, seq_len=seq, peft=peft)


def test_adapter_counts_follow_the_shapes() -> None:
    # Llama-2-70B, r=16 on Q, K, V, O: 16 x (2 x (8192 + 8192) + 2 x (8192 + 1024)) per layer, 80 layers.
    peft = lora.Peft(rank=16, targets="attn")
    assert lora.adapter_params_per_layer(LLAMA70, peft) == 16 * (2 * 16384 + 2 * 9216)
    assert lora.trainable_params(LLAMA70, peft) == 80 * 819_200
    mlp = lora.Peft(rank=16, targets="attn-mlp")
    assert lora.trainable_params(LLAMA70, mlp) > lora.trainable_params(LLAMA70, peft)
    everything = lora.Peft(rank=16, targets="all")
    assert lora.trainable_params(LLAMA70, everything) - lora.trainable_params(LLAMA70, mlp) == 16 * (8192 + 32000)


def test_frozen_base_holds_no_gradients_or_optimizer_state(db) -> None:
    full, tuned = _jobs(lora.Peft(rank=16))
    system = db.systems["dgx-a100"]
    lay = single_layout(tp=8, pp=1, dp=1, recompute="full", sp=True)
    saved_gib = (estimate_steps(full, system, lay).memory_gib_per_gpu[0]
                 - estimate_steps(tuned, system, lay).memory_gib_per_gpu[0])
    # Full training keeps 4 B of gradient and 12 B of optimizer state per weight; the adapters keep theirs.
    base_state_gib = (LLAMA70.layers * LLAMA70.layer_params() + LLAMA70.embedding_params()) / 8 * 16 / GIB
    adapters_gib = lora.trainable_params(LLAMA70, tuned.peft) / 8 * 18 / GIB
    assert saved_gib == pytest.approx(base_state_gib - adapters_gib, rel=0.01)


def test_backward_skips_the_base_weight_gradients(db) -> None:
    full, tuned = _jobs(lora.Peft(rank=16))
    lay = single_layout(tp=8, pp=1, dp=1, recompute="none", sp=True)
    a = estimate_steps(full, db.systems["dgx-h100"], lay)
    b = estimate_steps(tuned, db.systems["dgx-h100"], lay)
    # GEMMs dominate: forward + backward drops from about 3 units to about 2.
    assert 0.6 < b.compute_s[0] / a.compute_s[0] < 0.8


def test_data_parallelism_reduces_only_adapter_gradients(db) -> None:
    full, tuned = _jobs(lora.Peft(rank=16), batch=64)
    system = db.systems["dgx-h100"].with_gpus(32)
    lay = single_layout(tp=8, pp=1, dp=4, recompute="full", sp=True)
    a = estimate_steps(full, system, lay, ).dp_comm_exposed_s[0]
    b = estimate_steps(tuned, system, lay).dp_comm_exposed_s[0]
    assert a > 0 and b < a / 50


def test_fully_sharded_lora_still_gathers_the_frozen_weights(db) -> None:
    _, tuned = _jobs(lora.Peft(rank=16), batch=64)
    system = db.systems["dgx-h100"].with_gpus(16)
    est = estimate_steps(tuned, system, single_layout(tp=1, pp=1, dp=16, recompute="full", zero=3))
    assert est.dp_comm_exposed_s[0] > 0


def test_a_4bit_base_needs_less_memory(db) -> None:
    system = db.systems["dgx-a100"]
    lay = single_layout(tp=1, pp=1, dp=8, recompute="full", zero=3)
    mem = {p: estimate_steps(_jobs(lora.Peft(rank=16, base_precision=p))[1], system, lay).memory_gib_per_gpu[0]
           for p in ("bf16", "nf4")}
    assert mem["nf4"] < mem["bf16"]


def test_seed_finetune_fits_on_eight_a100s(db) -> None:
    # Full training of Llama-2-70B does not fit on one DGX A100; its LoRA fine-tune does.
    full, tuned = _jobs(lora.Peft(rank=16), batch=8)
    system = db.systems["dgx-a100"]
    assert not predict_train(full, system, LayoutRequest()).fits
    p = predict_train(tuned, system, LayoutRequest())
    assert p.fits and np.isfinite(p.step_time_s) and p.trainable_params == 65_536_000


@pytest.mark.parametrize("peft, req, words", [
    (lora.Peft(rank=0), LayoutRequest(), "--lora-rank"),
    (lora.Peft(rank=8193), LayoutRequest(), "--lora-rank"),
    (lora.Peft(rank=16, targets="mlp"), LayoutRequest(), "--lora-targets"),
    (lora.Peft(rank=16, base_precision="nf4"), LayoutRequest(tp=2), "data parallelism"),
    (lora.Peft(rank=16, base_precision="fp8"), LayoutRequest(), "no FP8"),
])
def test_bad_peft_is_a_user_error(db, peft: lora.Peft, req: LayoutRequest, words: str) -> None:
    with pytest.raises(UserError, match=words):
        predict_train(Job(model=LLAMA70, global_batch=8, seq_len=4096, peft=peft), db.systems["dgx-a100"], req)


def test_cli_json_names_the_fine_tune() -> None:
    result = run_cli("predict", "train", "-s", "dgx-a100", "-m", "llama2-70b", "--gpus", "8", "--peft", "lora",
                     "--lora-rank", "8", "--global-batch", "8", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["peft"] == {"method": "lora", "rank": 8, "targets": "attn", "base_precision": "bf16"}
    assert doc["fits"] and doc["trainable_params"] == 80 * 409_600 and doc["frozen_params"] == LLAMA70.total_params()


def test_cli_bad_rank_is_one_line() -> None:
    result = run_cli("predict", "train", "-s", "dgx-a100", "-m", "llama2-70b", "--peft", "lora", "--lora-rank", "0")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("command", [["predict", "train", "-s", "dgx-h100", "--gpus", "16"],
                                     ["advise", "train", "--tokens", "200M", "--gpus", "8"]])
def test_lora_on_an_moe_model_is_refused_not_priced_as_dense(command: list[str]) -> None:
    result = run_cli(*command, "-m", "mixtral-8x7b", "--peft", "lora")
    assert result.exit_code == 2, result.output
    assert "LoRA on an MoE model (mixtral-8x7b) is not modelled" in result.output
    assert len(result.output.strip().splitlines()) == 1
