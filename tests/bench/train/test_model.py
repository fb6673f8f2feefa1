"""The decoder `bench train` builds, scaled-down model specs, and the checks made before any rank starts."""

from __future__ import annotations

import pytest
import torch

from linkscope.bench.train.config import TrainConfig, check_backend, check_layout, resolved_precision
from linkscope.bench.train.loop import synthetic_batches, where_label
from linkscope.bench.train.model import Decoder, loss_of, parameter_count
from linkscope.hardware.errors import UserError
from linkscope.model.step.scaled import scaled_model
from linkscope.model.step.transformer import load_model


def _small(**kw: int) -> object:
    return scaled_model(load_model("llama2-70b"), layers=2, hidden=128, heads=8, vocab=256, seq_len=16, **kw)


def test_scaling_down_keeps_the_head_ratio_and_the_mlp_ratio() -> None:
    m = scaled_model(load_model("llama2-70b"), layers=2, hidden=256, heads=16, vocab=512, seq_len=64)
    assert (m.layers, m.hidden, m.heads, m.vocab, m.seq_len) == (2, 256, 16, 512, 64)
    assert m.heads // m.kv_heads == 64 // 8  # grouped-query attention survives
    assert m.ffn_hidden == round(28672 * 256 / 8192 / 8) * 8
    assert m.id == "llama2-70b-2l-256h"


def test_scaling_down_without_heads_keeps_the_head_width() -> None:
    m = scaled_model(load_model("llama2-7b"), hidden=512)
    assert m.head_dim == 128 and m.heads == 4


def test_scaling_refuses_a_width_the_heads_do_not_divide() -> None:
    with pytest.raises(UserError, match="--hidden 100 is not a multiple of the 3 attention heads"):
        scaled_model(load_model("llama2-7b"), hidden=100, heads=3)
    with pytest.raises(UserError, match="--layers must be (at least 1|from 1 to)"):
        scaled_model(load_model("llama2-7b"), layers=0)


def test_the_decoder_has_the_parameters_the_flop_convention_counts() -> None:
    m = _small()
    model = Decoder(m)
    # ModelConfig counts two two-vector layer norms per layer; RMSNorm has one vector, plus the final norm.
    assert parameter_count(model) == m.total_params() - 2 * m.hidden * m.layers + m.hidden


def test_the_decoder_learns_the_synthetic_tokens() -> None:
    m = _small()
    torch.manual_seed(0)
    model = Decoder(m)
    cfg = TrainConfig(model=m, micro_batch=2)
    batches = synthetic_batches(cfg, 0, torch.device("cpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for i in range(12):
        batch = batches[i % len(batches)]
        loss = loss_of(model(batch[:, :-1]), batch[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 0.3


def test_full_recomputation_gives_the_same_gradients() -> None:
    m = _small()
    batch = synthetic_batches(TrainConfig(model=m), 0, torch.device("cpu"))[0]
    grads = []
    for recompute in ("none", "full"):
        torch.manual_seed(0)
        model = Decoder(m, recompute)
        loss_of(model(batch[:, :-1]), batch[:, 1:]).backward()
        grads.append(model.layers[0].mlp.down.weight.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_invalid_options_name_the_flag() -> None:
    m = _small()
    cases = [(dict(micro_batch=0), "--micro-batch must be at least 1"), (dict(zero=4), "--zero must be 0, 1, 2 or 3"),
             (dict(grad_compression="zip"), "--grad-compression: 'zip' is not one of"),
             (dict(recompute="some"), "--recompute: 'some' is not one of"),
             (dict(zero=2, grad_compression="fp16"), "cannot be combined with --fsdp/--zero"),
             (dict(bucket_mb=0), "--bucket-mb must be more than 0")]
    for kwargs, message in cases:
        with pytest.raises(UserError, match=message):
            TrainConfig(model=m, **kwargs).validated()


def test_fsdp_means_zero_3_unless_a_stage_is_given() -> None:
    m = _small()
    assert TrainConfig(model=m, fsdp=True).validated().zero == 3
    assert TrainConfig(model=m, zero=2).validated().layout == "fsdp"
    assert TrainConfig(model=m).validated().layout == "ddp"


def test_invalid_layouts_are_refused_with_one_line() -> None:
    m = _small()
    with pytest.raises(UserError, match="^tp: 3 does not divide the 2 ranks"):
        check_layout(TrainConfig(model=m, tp=3), 2)
    with pytest.raises(UserError, match="^tp: 2 needs at least 2 ranks"):
        check_layout(TrainConfig(model=m, tp=2), 1)
    odd = scaled_model(load_model("llama2-7b"), hidden=96, heads=3, layers=1)
    with pytest.raises(UserError, match="^tp: 2 does not divide the 3 attention heads"):
        check_layout(TrainConfig(model=odd, tp=2), 2)
    with pytest.raises(UserError, match="bf16 needs the nccl backend"):
        check_backend(TrainConfig(model=m, grad_compression="bf16"), "gloo")
    even = scaled_model(load_model("llama2-7b"), hidden=128, heads=2, layers=1)
    with pytest.raises(UserError, match="^tp: 2 on 2 ranks leaves no data-parallel ranks for --fsdp/--zero"):
        check_layout(TrainConfig(model=even, tp=2, zero=3), 2)
    with pytest.raises(UserError, match="^tp: 2 on 2 ranks leaves no data-parallel ranks for --grad-compression"):
        check_layout(TrainConfig(model=even, tp=2, grad_compression="fp16"), 2)
    with pytest.raises(UserError, match="^tp: 4 does not divide the 6 ranks"):
        check_layout(TrainConfig(model=even, tp=4), 6)
    check_layout(TrainConfig(model=even, tp=2, zero=3), 4)  # tp inside, FSDP2 over the other dimension


def test_tensor_parallel_layouts_name_their_data_parallel_part() -> None:
    m = _small()
    assert TrainConfig(model=m, tp=2).layout_on(2) == "tp"
    assert TrainConfig(model=m, tp=2).layout_on(4) == "tp+ddp"
    assert TrainConfig(model=m, tp=2, fsdp=True).validated().layout_on(4) == "tp+fsdp"


def test_cpu_ranks_train_in_fp32_and_gpus_in_bf16_by_default() -> None:
    m = _small()
    assert resolved_precision(TrainConfig(model=m), "gloo") == "fp32"
    assert resolved_precision(TrainConfig(model=m), "nccl") == "bf16"
    with pytest.raises(UserError, match="^precision: fp16 needs GPUs"):
        resolved_precision(TrainConfig(model=m, precision="fp16"), "gloo")


def test_progress_counters_read_as_steps() -> None:
    where = where_label(TrainConfig(model=_small(), warmup=2, iters=3, repeat=2))
    assert where(0) == "while starting"
    assert where(1) == "in warm-up step 1 of repeat 1"
    assert where(2) == "in warm-up step 1 of repeat 1"  # inside it
    assert where(8) == "in step 2 of 3 of repeat 1"
    assert where(12) == "in warm-up step 1 of repeat 2"
    assert where(21) == "while tracing"


def test_moe_layouts_the_synthetic_decoder_cannot_run_are_refused() -> None:
    moe = scaled_model(load_model("mixtral-8x7b"), hidden=64, layers=1)
    assert moe.is_moe and moe.moe_ffn_hidden == 224  # the experts narrow with the model
    check_layout(TrainConfig(model=moe, ep=2), 2)
    check_layout(TrainConfig(model=moe, ep=1), 2)
    with pytest.raises(UserError, match="^ep: 2 must be 1 .* or the 4 ranks"):
        check_layout(TrainConfig(model=moe, ep=2), 4)
    with pytest.raises(UserError, match="^ep: 3 does not divide the 8 experts"):
        check_layout(TrainConfig(model=moe, ep=3), 3)
    with pytest.raises(UserError, match="--tp cannot be combined with experts"):
        check_layout(TrainConfig(model=moe, tp=2), 2)
    dense = scaled_model(load_model("llama2-7b"), hidden=64, layers=1)
    with pytest.raises(UserError, match="^ep: 2 needs a mixture-of-experts model"):
        check_layout(TrainConfig(model=dense, ep=2), 2)
