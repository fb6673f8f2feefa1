"""Memory per GPU at the edge: what ZeRO shards over, which stage is busiest, FP8's saved inputs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from linkscope.model.step.compute import compute_constants
from linkscope.model.step.job import Job
from linkscope.model.step.layout import Layouts, single_layout
from linkscope.model.step.memory import GIB, activation_bytes_per_token, memory_gib_per_gpu
from linkscope.model.step.transformer import model_presets


def _job(model: str, batch: int, seq_len: int = 8192, precision: str = "bf16") -> Job:
    return Job(model=model_presets()[model], global_batch=batch, seq_len=seq_len, precision=precision)


def test_context_parallel_ranks_share_the_sharded_optimizer() -> None:
    # Context-parallel ranks hold the same weights, so the distributed optimizer shards over dp x cp: cp 2 x dp 4
    # holds the optimizer shard of dp 8.
    from linkscope.model.step.memory import _second_embedding_bytes, _state_bytes
    job, c = _job("llama3-8b", 128), compute_constants()

    def layout(dp: int, cp: int) -> Layouts:
        return single_layout(tp=1, pp=1, dp=dp, cp=cp, mb=1, zero=1)

    def state_gib(dp: int, cp: int) -> float:
        return float(_state_bytes(job, layout(dp, cp))[0] + _second_embedding_bytes(job, layout(dp, cp))[0]) / GIB

    assert state_gib(4, 2) == pytest.approx(state_gib(8, 1))
    m = job.model
    params = m.layers * m.layer_params() + 2 * m.embedding_params()
    optimizer_saved_gib = params * c.optimizer_bytes * (1 / 4 - 1 / 8) / GIB
    assert state_gib(4, 1) - state_gib(4, 2) == pytest.approx(optimizer_saved_gib)
    # Beyond the state, the shorter local sequence halves the activations and logits.
    cp2 = float(memory_gib_per_gpu(job, None, layout(4, 2))[0])
    no_cp = float(memory_gib_per_gpu(job, None, layout(4, 1))[0])
    assert no_cp - cp2 > optimizer_saved_gib


def test_the_first_stage_is_busiest_and_the_logits_stay_on_the_last() -> None:
    # With 8 stages the first holds 8 micro-batches in flight, the last one plus the logits: the peak is the
    # first stage's state and activations, without the last stage's logits.
    from linkscope.model.step.memory import _in_flight_layers_bytes, _logits_bytes, _state_bytes
    job = _job("llama2-70b", 64, seq_len=4096)
    lay = single_layout(tp=8, pp=8, dp=1, mb=1, zero=0, sp=True)
    per_token = activation_bytes_per_token(job, lay)
    first = float(_in_flight_layers_bytes(job, lay, per_token)[0])
    last = float(_in_flight_layers_bytes(job, lay, per_token, "last")[0] + _logits_bytes(job, lay)[0])
    assert first > last
    state = float(_state_bytes(job, lay)[0])
    assert float(memory_gib_per_gpu(job, None, lay)[0]) == pytest.approx((state + first) / GIB)
    # Without pipelining one GPU holds both, logits included.
    flat = single_layout(tp=8, pp=1, dp=1, mb=1, zero=0, sp=True)
    one_stage = float(memory_gib_per_gpu(job, None, flat)[0]) * GIB
    assert one_stage > float(_state_bytes(job, flat)[0]) + float(_in_flight_layers_bytes(job, flat, per_token)[0]) \
        + float(_logits_bytes(job, flat)[0])


def test_fp8_linears_keep_their_inputs_in_one_byte() -> None:
    bf16, fp8 = _job("llama3-70b", 64), _job("llama3-70b", 64, precision="fp8")
    lay = single_layout(tp=8, pp=1, dp=1, mb=1, sp=True)
    m = bf16.model
    saved = float(activation_bytes_per_token(bf16, lay)[0] - activation_bytes_per_token(fp8, lay)[0])
    # The two norms' outputs (h each), FC2's input (the MLP width) less the projection's FP8 copy (h), / tp.
    assert saved == pytest.approx((2 * m.hidden + m.mean_ffn_width() - m.hidden) / 8)


def test_fp8_does_not_change_a_lora_base_activations() -> None:
    # With every linear adapted, the adapters read each BF16 input: more than FP8 full training keeps.
    from linkscope.model.step.peft import Peft
    job = _job("llama3-8b", 8, precision="fp8")
    lora = replace(job, peft=Peft(rank=16, targets="attn-mlp"))
    lay = single_layout(tp=1, pp=1, dp=8, mb=1)
    assert activation_bytes_per_token(lora, lay)[0] > activation_bytes_per_token(job, lay)[0]
    assert activation_bytes_per_token(lora, lay)[0] == activation_bytes_per_token(replace(lora, precision="bf16"),
                                                                                  lay)[0]


def test_frozen_mlp_linears_keep_no_inputs_under_attention_lora() -> None:
    # Transformer Engine keeps a linear's input only for its weight gradient (backward_needs_input =
    # weight.requires_grad): with adapters on attention only, FC1's input (2 h) and FC2's input (2 bytes a value
    # of the FFN width) are not kept; the adapted attention linears keep theirs.
    from linkscope.model.step.peft import Peft
    job = _job("llama2-70b", 8)
    attn = replace(job, peft=Peft(rank=16, targets="attn"))
    every = replace(job, peft=Peft(rank=16, targets="attn-mlp"))
    m = job.model
    for lay in (single_layout(tp=1, pp=1, dp=8, mb=1), single_layout(tp=4, pp=1, dp=2, mb=1, sp=True)):
        saved = float(activation_bytes_per_token(every, lay)[0] - activation_bytes_per_token(attn, lay)[0])
        adapters = 2 * 16 * 3  # the MLP adapters' own r-wide intermediates (x A) on FC1's two halves and FC2
        tp = int(lay.tp[0])
        assert saved == pytest.approx((2 * m.hidden + 2 * m.mean_ffn_width()) / tp + adapters)


def test_when_nothing_fits_the_fallback_shows_the_least_memory_with_the_values_given() -> None:
    from linkscope.hardware.loader import load_db
    from linkscope.model.step.predict import predict_train
    from linkscope.model.step.search import LayoutRequest

    system = load_db(include_user=False).systems["dgx-h100"]
    job = _job("llama3.1-405b", 64)
    fixed = LayoutRequest(tp=8, pp=1, interleave=1, micro_batch=1)
    p = predict_train(job, system, fixed)
    assert not p.fits and p.least_memory_gib_per_gpu is not None
    # The shown layout is the one closest to fitting among those that keep the values given.
    assert p.least_memory_gib_per_gpu == p.memory_gib_per_gpu
    assert (p.parallelism.tp, p.parallelism.pp, p.parallelism.interleave, p.parallelism.micro_batch) == (8, 1, 1, 1)
    assert p.flags[0].startswith("no layout fits in memory: showing the one that needs the least")
    assert f"{p.least_memory_gib_per_gpu:.1f} GiB per GPU" in p.flags[0]
    assert any(f.startswith("does not fit:") and "usable" in f for f in p.flags)
    # A value the user gave is kept: recomputation given as none stays none.
    kept = predict_train(job, system, LayoutRequest(tp=8, pp=1, micro_batch=1, recompute="none"))
    assert kept.parallelism.recompute == "none" and not kept.fits


def test_short_pipeline_stages_are_the_first_and_the_last() -> None:
    # 126 layers on 16 stages: 7 + 14 x 8 + 7. The second stage (8 layers, 15 micro-batches in flight) then
    # holds more than the first (7 layers, 16 in flight).
    from linkscope.model.step.memory import _in_flight_layers_bytes, _stage_layers
    job = _job("llama3.1-405b", 2048)
    lay = single_layout(tp=8, pp=16, dp=64, mb=1, sp=True)
    assert [float(_stage_layers(job, lay, s)[0]) for s in ("first", "second", "last")] == [7.0, 8.0, 7.0]
    per_token = activation_bytes_per_token(job, lay)
    first = float(_in_flight_layers_bytes(job, lay, per_token, "first")[0])
    second = float(_in_flight_layers_bytes(job, lay, per_token, "second")[0])
    assert second / first == pytest.approx((8 * 15) / (7 * 16))


def test_the_loss_holds_its_logits_at_the_frameworks_bytes_per_logit() -> None:
    # Megatron's vocab-parallel cross-entropy works in place in one FP32 copy of the BF16 logits (6 bytes a
    # logit); PyTorch's eager cross-entropy on `.float()` logits keeps 12 at its backward peak.
    from linkscope.model.step.memory import LOSS_BYTES_PER_LOGIT
    lay = single_layout(tp=1, pp=1, dp=8, mb=2, zero=0)
    megatron = replace(_job("llama3-8b", 16), framework="megatron")
    fsdp = replace(megatron, framework="fsdp")
    logits = 2 * 8192 * megatron.model.vocab
    grown = float(memory_gib_per_gpu(fsdp, None, lay)[0] - memory_gib_per_gpu(megatron, None, lay)[0]) * GIB
    assert grown == pytest.approx(logits * (LOSS_BYTES_PER_LOGIT["fsdp"] - LOSS_BYTES_PER_LOGIT["megatron"]))
    assert LOSS_BYTES_PER_LOGIT["megatron"] == 2 + 4


def test_full_recomputation_peaks_at_the_loss_or_one_recomputed_layer_not_both() -> None:
    from linkscope.model.step.memory import (_in_flight_layers_bytes, _logits_bytes, _recompute_working_bytes,
                                             _second_embedding_bytes, _state_bytes)
    job = _job("llama3-8b", 64, seq_len=32768)
    lay = single_layout(tp=1, pp=1, dp=8, mb=1, zero=3, recompute="full")
    per_token = activation_bytes_per_token(job, lay)
    stored = float(_in_flight_layers_bytes(job, lay, per_token)[0])
    working = float(_recompute_working_bytes(job, lay, per_token)[0])
    logits = float(_logits_bytes(job, lay)[0])
    state = float(_state_bytes(job, lay)[0] + _second_embedding_bytes(job, lay)[0])
    assert logits > working > 0
    # Only the layer inputs stay: 2 bytes x hidden per token and layer.
    assert stored == pytest.approx(2 * job.model.hidden * 32768 * job.model.layers)
    assert float(memory_gib_per_gpu(job, None, lay)[0]) == pytest.approx((state + stored + logits) / GIB)


def test_fsdp_under_pipeline_parallelism_keeps_the_stage_gathered_with_its_gradients() -> None:
    # torchtitan does not reshard a stage between micro-batches and accumulates unsharded gradients: the
    # stage's whole weights (2 bytes) and FP32 gradients (4) on top of the shards, not two layers' worth.
    from linkscope.model.step.memory import _zero3_working_bytes, stage_params
    job = _job("llama3.1-405b", 256)
    c = compute_constants()
    piped = single_layout(tp=8, pp=8, dp=8, mb=1, zero=3, recompute="full", sp=True)
    dense, expert, _ = stage_params(job, piped)
    assert float(_zero3_working_bytes(job, piped)[0]) == pytest.approx(
        float(dense[0] + expert[0]) * (c.weight_bytes + c.grad_bytes))
    flat = single_layout(tp=8, pp=1, dp=64, mb=1, zero=3, recompute="full", sp=True)
    layer = job.model.layer_params() / 8
    assert float(_zero3_working_bytes(job, flat)[0]) == pytest.approx(layer * (2 * c.weight_bytes + c.grad_bytes))


@pytest.mark.parametrize(("model", "batch", "seq_len", "tp", "pp", "dp", "mb", "published_gib"), [
    # torchtitan's benchmarks/llama3_h100_202412_torchtitan.md (full activation checkpointing, Float8, peak
    # memory the allocator reserved over all GPUs): Table 2 (FSDP 8, CP 1), Table 4 (2D) and Table 5 (1F1B: the
    # local batch of 32 in torchtitan's default pp = 8 micro-batches, so micro-batches of 4).
    ("llama3-8b", 8, 32768, 1, 1, 8, 1, 83.9),
    ("llama3-70b", 512, 8192, 8, 1, 32, 16, 71.9),
    ("llama3.1-405b", 256, 8192, 8, 8, 8, 4, 82.5),
])
def test_full_recomputation_memory_stays_within_the_allocators_margin_of_torchtitans_published_peak(
        model: str, batch: int, seq_len: int, tp: int, pp: int, dp: int, mb: int, published_gib: float) -> None:
    # The model counts what is allocated, the published figure what the allocator reserved: the estimate may be
    # below it by the allocator's fragmentation, no more (it was 2-4x below before the loss buffers and FSDP's
    # unsharded pipeline stage were counted).
    job = _job(model, batch, seq_len=seq_len, precision="fp8")
    lay = single_layout(tp=tp, pp=pp, dp=dp, mb=mb, zero=3, recompute="full", sp=tp > 1)
    predicted = float(memory_gib_per_gpu(job, None, lay)[0])
    assert 0.65 * published_gib < predicted <= published_gib


def test_a_model_trained_without_dropout_keeps_no_dropout_masks() -> None:
    # Megatron-style dropout after attention and after the MLP keeps a one-byte mask per value each; Llama and
    # the other presets trained at dropout 0 keep none (PyTorch's dropout at p=0 returns its input).
    presets = model_presets()
    assert not presets["llama3-8b"].dropout and not presets["gpt-oss-120b"].dropout
    assert presets["gpt3-175b"].dropout and presets["megatron-530b"].dropout
    job = _job("llama3-8b", 8)
    with_dropout = replace(job, model=replace(job.model, dropout=True))
    for tp, sp in ((1, False), (8, True)):
        lay = single_layout(tp=tp, pp=1, dp=1, mb=1, sp=sp)
        masks = float(activation_bytes_per_token(with_dropout, lay)[0] - activation_bytes_per_token(job, lay)[0])
        assert masks == pytest.approx(2 * job.model.hidden / (tp if sp else 1))
    unfused = replace(job, attention="unfused")
    lay = single_layout(tp=1, pp=1, dp=1, mb=1, recompute="none")
    softmax_mask = float(activation_bytes_per_token(replace(unfused, model=with_dropout.model), lay)[0]
                         - activation_bytes_per_token(unfused, lay)[0]) - 2 * job.model.hidden
    assert softmax_mask == pytest.approx(job.model.heads * 8192)


def test_a_model_file_may_say_it_trains_without_dropout(tmp_path: Path) -> None:
    from linkscope.model.step.transformer import load_model
    path = tmp_path / "m.yaml"
    path.write_text("layers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq_len: 128\ndropout: false\n")
    assert not load_model(str(path)).dropout
    path.write_text("layers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq_len: 128\n")
    assert load_model(str(path)).dropout


def test_gpt_oss_120b_on_64_h100_fits_its_recipe_with_expert_optimizer_state_sharded_over_expert_dp() -> None:
    # Megatron-Bridge 25.11's recipe: PP 4, EP 8, micro-batch 1 on 64 H100 (dp 16). The distributed optimizer
    # shards routed experts' state over their expert data-parallel ranks, 64 / (4 x 8) = 2, and the rest over dp.
    from linkscope.hardware.loader import load_db
    from linkscope.model.fidelity.evidence import TrainingEntry, load_evidence
    from linkscope.model.fidelity.evidence_predict import memory_share
    from linkscope.model.step.memory import _state_bytes, stage_params
    job = _job("gpt-oss-120b", 512, seq_len=4096)
    lay = single_layout(tp=1, pp=4, dp=16, mb=1, zero=1, ep=8)
    c = compute_constants()
    dense, expert, edp = stage_params(job, lay)
    assert int(edp[0]) == 2
    expected = dense * (c.weight_bytes + c.grad_bytes + c.optimizer_bytes / 16) \
        + expert * (c.weight_bytes + c.grad_bytes + c.optimizer_bytes / 2)
    assert float(_state_bytes(job, lay)[0]) == pytest.approx(float(expected[0]))
    entry = next(e for e in load_evidence().entries("training") if isinstance(e, TrainingEntry)
                 and (e.source, e.system, e.model) == ("megatron-bridge-25.11-moe", "dgx-h100", "gpt-oss-120b"))
    assert isinstance(entry, TrainingEntry) and (entry.micro_batch, entry.pp, entry.ep) == (1, 4, 8)
    assert memory_share(entry, load_db(include_user=False)) < 0.85
    # The row's printed micro-batch 4 would not fit: four times the activations in flight.
    assert float(memory_gib_per_gpu(job, None, single_layout(tp=1, pp=4, dp=16, mb=4, zero=1, ep=8))[0]) > 80


def test_the_activation_functions_input_kept_in_fp8_halves_it() -> None:
    # Megatron-Core's activation_func_fp8_input_store: the SwiGLU input, both halves of FC1's output, one byte a
    # value instead of two; the MLPerf LoRA runs of AMD (FP8_ACTIVATION) and NVIDIA (FP8_ACT) set it.
    from linkscope.hardware.loader import load_db
    from linkscope.model.fidelity.evidence import TrainingEntry, load_evidence
    from linkscope.model.fidelity.evidence_predict import memory_share
    job = _job("llama2-70b", 8, precision="fp8")
    stored = replace(job, fp8_activation_store=True)
    lay = single_layout(tp=1, pp=1, dp=8, mb=1, zero=1)
    saved = float(activation_bytes_per_token(job, lay)[0] - activation_bytes_per_token(stored, lay)[0])
    assert saved == pytest.approx(2 * job.model.ffn_hidden)
    db = load_db(include_user=False)
    amd = [e for e in load_evidence().entries("training") if isinstance(e, TrainingEntry)
           and e.source.startswith("mlperf-training-v5.0-") and e.source.endswith("amd")]
    assert len(amd) == 5 and all(e.fp8_activation_store for e in amd)
    # They ran: each is predicted within what the GPU offers.
    assert all(memory_share(e, db) < 1.0 for e in amd)


def test_gradients_reduced_in_bf16_halve_the_gradient_buffers_and_the_bytes_reduced() -> None:
    # Megatron's grad_reduce_in_fp32 = False (every GPT OSS recipe of Megatron-Bridge 25.11): the gradient buffer
    # and its reduce-scatter are in the parameters' BF16.
    from linkscope.model.step.layout import Layout
    from linkscope.model.step.memory import _state_bytes, stage_params
    from linkscope.model.step.step_collectives import step_items
    job = _job("gpt-oss-120b", 512, seq_len=4096)
    bf16 = replace(job, grad_precision="bf16")
    lay = single_layout(tp=1, pp=4, dp=16, mb=1, zero=1, ep=8)
    dense, expert, _ = stage_params(job, lay)
    saved = float(_state_bytes(job, lay)[0] - _state_bytes(bf16, lay)[0])
    assert saved == pytest.approx(float(dense[0] + expert[0]) * 2)
    layout = Layout(tp=1, pp=4, dp=16, micro_batch=1, zero=1, ep=8)
    fp32_rs = step_items(job, layout)["dp"][0]
    bf16_rs = step_items(bf16, layout)["dp"][0]
    assert fp32_rs[0] == bf16_rs[0] == "reduce_scatter" and bf16_rs[1] == pytest.approx(fp32_rs[1] / 2)
    assert float(memory_gib_per_gpu(bf16, None, lay)[0]) < 0.7 * 80


def test_an_interleaved_warm_up_holds_no_more_than_the_steps_chunks() -> None:
    # torchtitan's Table 5 (benchmarks/llama3_h100_202412_torchtitan.md): 405B on PP 8, 8 micro-batches of 4, two
    # stages per rank. The warm-up would run 2 (p - 1) + p + 1 = 23 chunk forwards on the first stage, but the
    # step has only 8 x 2 = 16: all run before the first backward, the 1F1B schedule's 8 stage micro-batches.
    # Published: 72.7 GiB reserved interleaved, 82.5 under 1F1B; predicted 74.3 before the cap, above the figure.
    from linkscope.model.step.memory import layer_microbatches_in_flight
    job = _job("llama3.1-405b", 256, precision="fp8")
    plain = single_layout(tp=8, pp=8, dp=8, mb=4, zero=3, recompute="full", sp=True)
    looped = single_layout(tp=8, pp=8, dp=8, v=2, mb=4, zero=3, recompute="full", sp=True)
    assert float(layer_microbatches_in_flight(job, looped)[0]) == float(layer_microbatches_in_flight(job, plain)[0]) \
        == 8 * 15
    assert float(memory_gib_per_gpu(replace(job, framework="fsdp"), None, looped)[0]) < 72.7


def test_with_more_micro_batches_the_first_stage_pays_megatrons_interleaving_penalty() -> None:
    # Megatron's theoretical_memory_usage.py: (1 + (p - 1) / (p v)) x p stage micro-batches on the first stage.
    from linkscope.model.step.memory import layer_microbatches_in_flight
    job = _job("llama2-70b", 512, seq_len=4096)
    lay = single_layout(tp=8, pp=8, dp=4, v=5, mb=1, sp=True)
    stage_layers = 80 / 8
    assert float(layer_microbatches_in_flight(job, lay)[0]) == pytest.approx(8 * stage_layers * (1 + 7 / (8 * 5)))


def test_a_short_first_stage_is_short_in_its_first_chunk() -> None:
    # Llama 3.1 405B on PP 16 x VP 8: Megatron's account_for_embedding/loss_in_pipeline_split gives 128 chunks
    # of one layer with the embedding and the loss in place of the first and last. The first stage runs 2 x 15 +
    # 7 x 16 + 1 = 143 chunk forwards before its first backward, 31 of them of its empty first chunk: 112
    # layer micro-batches, not 143 x 7 / 8; the second stage 141, one layer each.
    from linkscope.model.step.memory import layer_microbatches_in_flight
    job = _job("llama3.1-405b", 1024)
    lay = single_layout(tp=8, pp=16, dp=32, v=8, mb=1, sp=True)
    assert float(layer_microbatches_in_flight(job, lay, "first")[0]) == 112
    assert float(layer_microbatches_in_flight(job, lay, "second")[0]) == 141


@pytest.mark.parametrize(("gpus", "pp", "v", "global_batch"), [
    # Megatron-Bridge's H100 performance recipe (perf_recipes/llama/h100/llama31.py,
    # llama31_405b_pretrain_1024gpu_h100_bf16_config: TP 8, PP 8, CP 2, VP 8, SP, micro-batch 1, no recomputation,
    # distributed optimizer) at its 25.11 summary's global batch, and DGX Cloud Benchmarking 25.02's 405B recipe
    # (TP 8, PP 9, CP 2, VP 7) on 576 GPUs: both ran on 80 GB H100s.
    (1024, 8, 8, 512),
    (576, 9, 7, 252),
])
def test_public_405b_recipes_without_recomputation_fit_on_80_gb_h100s(gpus: int, pp: int, v: int,
                                                                      global_batch: int) -> None:
    from linkscope.hardware.loader import load_db
    from linkscope.model.step.predict import predict_train
    from linkscope.model.step.search import LayoutRequest
    system = load_db(include_user=False).systems["dgx-h100"].with_gpus(gpus)
    job = replace(_job("llama3.1-405b", global_batch), framework="megatron")
    req = LayoutRequest(tp=8, pp=pp, cp=2, interleave=v, micro_batch=1, recompute="none", zero=1,
                        sequence_parallel=True)
    p = predict_train(job, system, req)
    assert p.fits and (p.parallelism.pp, p.parallelism.interleave) == (pp, v)


def test_405b_interleaved_over_16_stages_fits_when_the_step_has_one_micro_batch_per_stage() -> None:
    # 8K tokens, TP 8 x PP 16 x VP 8, no recomputation, on 16,384 H100 at a 16M-token batch: 16 micro-batches per
    # pipeline, as many as stages, so Megatron runs all 128 chunk forwards before the first backward (the second
    # stage holds 128 layer micro-batches, not 141). It was predicted at 76.8 GiB of 76.4, and the search fell
    # back to interleave 1 (45% bubble, 12.2 s a step against 7.4 s).
    from linkscope.hardware.loader import load_db
    from linkscope.model.step.memory import layer_microbatches_in_flight
    from linkscope.model.step.predict import predict_train
    from linkscope.model.step.search import LayoutRequest
    job = _job("llama3.1-405b", 2048)
    lay = single_layout(tp=8, pp=16, dp=128, v=8, mb=1, sp=True)
    assert float(layer_microbatches_in_flight(job, lay, "second")[0]) == 128
    system = load_db(include_user=False).systems["dgx-h100"].with_gpus(16384)
    p = predict_train(job, system, LayoutRequest(tp=8, pp=16, micro_batch=1, recompute="none"))
    assert p.fits and p.parallelism.interleave > 1


def test_torchtitans_loss_parallel_holds_four_fp32_copies_of_the_sharded_logits() -> None:
    # torchtitan's Table 4 (Llama 3.1 70B, TP 8 x FSDP 32, 16 sequences of 8K per rank): the loss runs on
    # vocabulary-sharded logits, whose backward keeps the log-softmax output, zeros_like(x), exp(x) and their sum
    # at once (16 bytes a logit; eager cross-entropy without TP 12). Published 71.9 GiB reserved; predicted
    # 48.9 -> 56.7.
    from linkscope.model.step.memory import LOSS_BYTES_PER_LOGIT, _logits_bytes
    job = replace(_job("llama3-70b", 512, precision="fp8"), framework="fsdp")
    tp8 = single_layout(tp=8, pp=1, dp=32, mb=16, zero=3, recompute="full", sp=True)
    tp1 = single_layout(tp=1, pp=1, dp=256, mb=16, zero=3, recompute="full")
    logits = 16 * 8192 * job.model.vocab
    assert float(_logits_bytes(job, tp8)[0]) == pytest.approx(logits / 8 * LOSS_BYTES_PER_LOGIT["fsdp-loss-parallel"])
    assert float(_logits_bytes(job, tp1)[0]) == pytest.approx(logits * LOSS_BYTES_PER_LOGIT["fsdp"])
    assert LOSS_BYTES_PER_LOGIT["fsdp-loss-parallel"] == 4 * 4
    assert 56 < float(memory_gib_per_gpu(job, None, tp8)[0]) < 71.9
