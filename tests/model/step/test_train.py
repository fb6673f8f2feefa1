"""Training-step model: memory after Korthikanti, structure of the step, layout search and its flags."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linkscope.hardware.loader import load_db
from linkscope.model.calibration.calibration_set import CASES
from linkscope.model.step.layout import single_layout
from linkscope.model.step.memory import GIB, activation_bytes_per_token
from linkscope.model.step.predict import BREAKDOWN_KEYS, predict_train
from linkscope.model.step.search import LayoutRequest, enumerate_layouts, search
from linkscope.model.step.job import Job
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import load_model, model_presets
from tests.cli.helpers import run_cli

TRAIN_KEYS = {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "memory_gib_per_gpu", "fits", "breakdown",
              "parallelism", "bottleneck"}


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def _job(model: str, batch: int, seq: int | None = None, **kw) -> Job:
    m = model_presets()[model]
    return Job(model=m, global_batch=batch, seq_len=seq or m.seq_len, **kw)


@pytest.mark.parametrize("model, expected_gib", [("megatron-22b", 9.56), ("megatron-1t", 26.56)])
def test_activation_memory_matches_korthikanti(model: str, expected_gib: float) -> None:
    # Korthikanti et al. Fig. 1 as Calculon reproduces it: sequence parallel + selective recompute.
    case = next(c for c in CASES if c.model == model and c.recompute == "selective")
    job = _job(model, case.global_batch, 2048, attention="unfused")
    lay = case.layout()
    per_token = activation_bytes_per_token(job, lay)[0]
    layers = job.model.layers / case.pp
    in_flight = min(case.pp, case.global_batch // case.micro_batch)
    total = per_token * case.micro_batch * 2048 * layers * in_flight / GIB
    assert total == pytest.approx(expected_gib, rel=0.03)


def test_breakdown_adds_up_to_the_step(db) -> None:
    job = _job("gpt3-175b", 64, 2048, attention="unfused")
    est = estimate_steps(job, db.systems["dgx-a100"].with_gpus(64),
                         single_layout(tp=8, pp=8, dp=1, v=3, mb=1, recompute="selective", sp=True))
    parts = sum(getattr(est, k)[0] for k in BREAKDOWN_KEYS)
    assert parts == pytest.approx(est.step_time_s[0], rel=1e-9)
    assert est.bubble_s[0] > 0 and est.tp_comm_exposed_s[0] > 0 and est.dp_comm_exposed_s[0] == 0


def test_full_recompute_costs_more_time_and_less_memory(db) -> None:
    job = _job("gpt3-175b", 64, 2048)
    system = db.systems["dgx-a100"].with_gpus(64)
    full = estimate_steps(job, system, single_layout(tp=8, pp=8, dp=1, recompute="full", sp=True))
    none = estimate_steps(job, system, single_layout(tp=8, pp=8, dp=1, recompute="none", sp=True))
    assert full.step_time_s[0] > none.step_time_s[0]
    assert full.memory_gib_per_gpu[0] < none.memory_gib_per_gpu[0]


def test_tensor_parallelism_over_pcie_is_communication_bound(db) -> None:
    job = _job("llama2-13b", 32)
    nvlink = predict_train(job, db.systems["hgx-h200"], LayoutRequest(tp=8, pp=1, dp=1))
    pcie = predict_train(job, db.systems["pcie-l40s"], LayoutRequest(tp=8, pp=1, dp=1))
    pcie_share = pcie.breakdown["tp_comm_exposed_s"] / pcie.step_time_s
    nvlink_share = nvlink.breakdown["tp_comm_exposed_s"] / nvlink.step_time_s
    assert pcie_share > 0.5 and nvlink_share < pcie_share / 2
    assert "tensor-parallel" in pcie.bottleneck


def test_search_resolves_auto_values_to_a_fitting_layout(db) -> None:
    job = _job("llama2-70b", 256)
    system = db.systems["dgx-h100"].with_gpus(32)
    result = search(job, system, LayoutRequest())
    row = result.layouts.row(result.best)
    assert result.any_fits and result.estimate.fits[result.best]
    assert row.world == 32
    assert result.evaluated > 100
    fitting = np.where(result.estimate.fits, result.estimate.step_time_s, np.inf)
    assert result.estimate.step_time_s[result.best] == fitting.min()


def test_enumeration_respects_fixed_values(db) -> None:
    job = _job("llama2-7b", 64)
    lay = enumerate_layouts(job, db.systems["dgx-a100"].with_gpus(16), LayoutRequest(tp=2, recompute="none"))
    assert set(lay.tp) == {2} and set(lay.recompute) == {0}
    assert np.all(lay.tp * lay.pp * lay.dp * lay.cp == 16)
    assert np.all(job.global_batch % (lay.dp * lay.mb) == 0)


def test_a_72_gpu_rack_runs_on_the_most_gpus_a_layout_divides(db) -> None:
    # 72 has the factor 9, which no power-of-two batch, head or layer count divides.
    job = _job("llama2-70b", 1024, 4096)
    rack = db.systems["gb200-nvl72"]
    assert len(enumerate_layouts(job, rack, LayoutRequest())) == 0
    prediction = predict_train(job, rack, LayoutRequest())
    assert prediction.gpus == 64 and prediction.parallelism.world == 64
    assert any("64 of the 72" in f for f in prediction.flags)
    whole = predict_train(job, db.systems["dgx-h100"].with_gpus(64), LayoutRequest())
    assert whole.gpus == 64 and not any("of the 8 GPUs" in f for f in whole.flags)


def test_unwise_layouts_are_predicted_and_flagged(db) -> None:
    job = _job("llama2-70b", 64)
    across = predict_train(job, db.systems["dgx-a100"].with_gpus(16), LayoutRequest(tp=16, pp=1, dp=1))
    assert any("spans nodes" in f for f in across.flags)
    too_big = predict_train(job, db.systems["dgx-a100"].with_gpus(8),
                            LayoutRequest(tp=8, pp=1, dp=1, recompute="none", zero=0))
    assert not too_big.fits and any("does not fit" in f for f in too_big.flags)


def test_predict_train_json_shape() -> None:
    result = run_cli("predict", "train", "--system", "dgx-a100", "--gpus", "16", "--model", "llama2-13b",
                     "--tp", "auto", "--pp", "auto", "--global-batch", "64", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) >= TRAIN_KEYS
    assert set(BREAKDOWN_KEYS) - {"cp_comm_exposed_s"} <= set(data["breakdown"])
    assert {"tp", "pp", "dp", "cp", "interleave", "micro_batch", "recompute", "zero"} <= set(data["parallelism"])
    assert data["step_time_s"] > 0 and 0 < data["mfu"] < 1


@pytest.mark.parametrize("args, message", [
    (["--tp", "3"], "does not divide the 40 attention heads"),
    (["--tp", "8", "--pp", "1", "--dp", "1"], "does not match 16 GPUs"),
    (["--tp", "8", "--pp", "1", "--dp", "2", "--micro-batch", "3"], "not divisible"),
    (["--tp", "x"], "expected a positive integer or 'auto'"),
    (["--zero", "5"], "--zero"),
    (["--precision", "fp4"], "--precision"),
    (["--gpus", "12"], "whole nodes"),
])
def test_impossible_layouts_exit_2(args: list[str], message: str) -> None:
    base = ["predict", "train", "--system", "dgx-a100", "--gpus", "16", "--model", "llama2-13b",
            "--global-batch", "64"]
    if "--gpus" in args:
        base = base[:4] + base[6:]
    result = run_cli(*base, *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr


def test_unknown_model_and_system_exit_2(tmp_path) -> None:
    result = run_cli("predict", "train", "--system", "dgx-h999", "--model", "llama2-7b", "--global-batch", "8")
    assert result.exit_code == 2 and "dgx-h100" in result.stderr
    result = run_cli("predict", "train", "--system", "dgx-h100", "--model", "llama9", "--global-batch", "8")
    assert result.exit_code == 2 and "unknown model" in result.stderr


def test_model_file(tmp_path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text("layers: 4\nhidden: 1024\nheads: 16\nvocab: 32000\nseq_len: 1024\ngated_mlp: true\n")
    model = load_model(str(path))
    assert (model.id, model.kv_heads, model.ffn_hidden) == ("tiny", 16, 4096)
    bad = tmp_path / "bad.yaml"
    bad.write_text("layers: 4\nhidden: 1000\nheads: 16\nvocab: 32000\nseq_len: 1024\n")
    result = run_cli("predict", "train", "--system", "dgx-h100", "--model", str(bad), "--global-batch", "8")
    assert result.exit_code == 2 and "not a multiple of heads" in result.stderr


def test_zero3_memory_holds_the_gathered_layers_beyond_its_shards(db) -> None:
    from linkscope.model.step.compute import compute_constants
    from linkscope.model.step.memory import ZERO3_LAYERS_GATHERED, memory_gib_per_gpu

    job = _job("llama2-70b", 64)
    system = db.systems["dgx-h100"].with_gpus(64)
    c, m = compute_constants(), job.model
    sharded = [memory_gib_per_gpu(job, system, single_layout(tp=1, pp=1, dp=dp, mb=1, recompute="full", zero=3))[0]
               for dp in (32, 64)]
    # Doubling dp halves the shards, not the layers in flight. Without pipelining one GPU holds the input
    # embedding and the (untied) output layer.
    params = m.layers * m.layer_params() + 2 * m.embedding_params()
    state_gib = params * (c.weight_bytes + c.grad_bytes + c.optimizer_bytes) / GIB
    working_gib = m.layer_params() * (ZERO3_LAYERS_GATHERED * c.weight_bytes + c.grad_bytes) / GIB
    assert sharded[0] - sharded[1] == pytest.approx(state_gib / 64, rel=1e-6)
    assert sharded[1] > state_gib / 64 + working_gib


def test_the_output_layer_does_not_speed_up_under_fp8(db) -> None:
    # FP8 recipes cast the transformer layers' linears only; the logits GEMM stays in BF16.
    from dataclasses import replace

    base = model_presets()["nemotron-8b"]
    small_vocab = replace(base, vocab=base.vocab // 8)
    system = db.systems["dgx-h100"].with_gpus(8)
    lay = single_layout(tp=1, pp=1, dp=8, mb=1, recompute="none", zero=1)

    def vocab_cost(precision: str) -> float:
        times = [float(estimate_steps(Job(model=m, global_batch=64, seq_len=4096, precision=precision), system,
                                      lay).compute_s[0]) for m in (base, small_vocab)]
        return times[0] - times[1]

    assert vocab_cost("fp8") == pytest.approx(vocab_cost("bf16"), rel=1e-9)
    layers_fp8 = estimate_steps(Job(model=small_vocab, global_batch=64, seq_len=4096, precision="fp8"), system, lay)
    layers_bf16 = estimate_steps(Job(model=small_vocab, global_batch=64, seq_len=4096), system, lay)
    assert layers_fp8.compute_s[0] < layers_bf16.compute_s[0]


def test_memoized_collectives_price_a_layout_as_the_search_does(db) -> None:
    # A few layouts take the memoized path, a search's many the vector path: one layout, same step time.
    from linkscope.model.step.layout import Layouts
    from linkscope.model.step.train import SMALL_LAYOUTS

    job = _job("llama2-70b", 256, 4096)
    system = db.systems["dgx-h100"].with_gpus(64)
    one = single_layout(tp=4, pp=2, dp=8, mb=1, zero=3, sp=True)
    many = Layouts(**{f: np.repeat(getattr(one, f), SMALL_LAYOUTS + 1) for f in one.__dataclass_fields__})
    memo = estimate_steps(job, system, one)
    vector = estimate_steps(job, system, many)
    assert memo.step_time_s[0] == vector.step_time_s[0]
    assert memo.dp_comm_exposed_s[0] == vector.dp_comm_exposed_s[0] > 0


def test_zero2_reduces_gradients_every_micro_batch(db) -> None:
    # ZeRO-2 keeps only its gradient shard, so each of the 8 micro-batches reduce-scatters; ZeRO-1 sums
    # full-size gradients locally and reduces once per step.
    job = _job("llama2-7b", 128, 4096, dp_overlap=False, framework="deepspeed")
    system = db.systems["dgx-h100"].with_gpus(16)
    zero1 = estimate_steps(job, system, single_layout(tp=1, pp=1, dp=16, mb=1, zero=1))
    zero2 = estimate_steps(job, system, single_layout(tp=1, pp=1, dp=16, mb=1, zero=2))
    assert zero2.microbatches[0] == 8
    assert zero2.dp_comm_exposed_s[0] > 4 * zero1.dp_comm_exposed_s[0] > 0


def test_the_framework_decides_whether_gradient_reduction_overlaps_backward(db) -> None:
    system = db.systems["dgx-h100"].with_gpus(16)
    layout = single_layout(tp=1, pp=1, dp=16, mb=1, zero=1)
    megatron = estimate_steps(_job("llama2-7b", 16, 4096, framework="megatron"), system, layout)
    deepspeed = estimate_steps(_job("llama2-7b", 16, 4096, framework="deepspeed"), system, layout)
    told = estimate_steps(_job("llama2-7b", 16, 4096, framework="deepspeed", dp_overlap=True), system, layout)
    assert deepspeed.dp_comm_exposed_s[0] > megatron.dp_comm_exposed_s[0] == told.dp_comm_exposed_s[0]


def test_predict_train_states_the_framework_and_rejects_a_stage_it_lacks() -> None:
    base = ["predict", "train", "-s", "dgx-h100", "--gpus", "16", "-m", "llama2-7b", "--global-batch", "64"]
    data = json.loads(run_cli(*base, "--zero", "3", "--json").stdout)
    assert data["framework"] == "fsdp" and data["framework_given"] is False
    data = json.loads(run_cli(*base, "--zero", "2", "--framework", "fsdp", "--json").stdout)
    assert data["framework"] == "fsdp" and data["framework_given"] is True and data["parallelism"]["zero"] == 2
    searched = json.loads(run_cli(*base, "--framework", "megatron", "--json").stdout)
    assert searched["parallelism"]["zero"] in (0, 1, 3)
    result = run_cli(*base, "--zero", "2", "--framework", "megatron")
    assert result.exit_code == 2 and "--framework: megatron does not run ZeRO stage 2" in result.output
    assert "framework" in run_cli(*base, "--zero", "1").stdout


def test_moe_training_searches_expert_parallelism_and_counts_dispatch_and_combine(db) -> None:
    system = db.systems["dgx-h100"].with_nodes(2)
    job = _job("mixtral-8x7b", 256, 4096)
    chosen = predict_train(job, system, LayoutRequest(tp=1, pp=1))
    assert chosen.parallelism.ep > 1 and chosen.breakdown["ep_comm_exposed_s"] > 0
    assert f"ep {chosen.parallelism.ep}" in chosen.expert_layout and "searched" in chosen.expert_layout
    given = predict_train(job, system, LayoutRequest(tp=1, pp=1, ep=8))
    assert given.expert_layout.endswith("as given (--ep)") and "searched" not in given.expert_layout
    # Expert parallelism 1: no all-to-all, but every GPU holds all experts' weights.
    alone = estimate_steps(job, system, single_layout(tp=1, pp=1, dp=16, zero=1, ep=1))
    spread = estimate_steps(job, system, single_layout(tp=1, pp=1, dp=16, zero=1, ep=8))
    assert float(alone.ep_comm_exposed_s[0]) == 0
    assert float(alone.memory_gib_per_gpu[0]) > float(spread.memory_gib_per_gpu[0]) + 10
    # DeepEP's hierarchical kernels beat NCCL's all-to-allv once EP crosses nodes.
    wide = LayoutRequest(tp=1, pp=1, ep=16, zero=1)
    nccl = predict_train(_job("qwen3-30b-a3b", 256, 4096), system, wide).breakdown["ep_comm_exposed_s"]
    deepep = predict_train(_job("qwen3-30b-a3b", 256, 4096, moe_dispatcher="deepep"), system,
                           wide).breakdown["ep_comm_exposed_s"]
    assert deepep < nccl


def test_experts_that_do_not_fit_at_the_given_ep_name_the_flag(db) -> None:
    from linkscope.hardware.errors import UserError

    with pytest.raises(UserError) as err:
        predict_train(_job("mixtral-8x22b", 64, 4096), db.systems["dgx-h100"], LayoutRequest(tp=1, pp=1, ep=1))
    assert "do not fit at ep 1" in str(err.value)


def test_dense_model_step_has_no_expert_traffic(db) -> None:
    est = estimate_steps(_job("llama2-7b", 64, 4096), db.systems["dgx-h100"], single_layout(tp=2, pp=1, dp=4, zero=1))
    assert float(est.ep_comm_exposed_s[0]) == 0.0


def test_a2a_overlap_hides_dispatch_and_combine_behind_compute(db) -> None:
    system = db.systems["dgx-h100"].with_nodes(2)
    layout = single_layout(tp=1, pp=1, dp=16, zero=1, ep=16)
    plain = estimate_steps(_job("qwen3-30b-a3b", 256, 4096), system, layout)
    hidden = estimate_steps(_job("qwen3-30b-a3b", 256, 4096, moe_a2a_overlap=True), system, layout)
    assert 0 <= float(hidden.ep_comm_exposed_s[0]) < float(plain.ep_comm_exposed_s[0])
    assert float(hidden.step_time_s[0]) < float(plain.step_time_s[0])


def test_dropless_imbalance_slows_the_step_against_forced_balance(db) -> None:
    system = db.systems["dgx-h100"].with_nodes(2)
    layout = single_layout(tp=1, pp=1, dp=16, zero=1, ep=8)
    balanced = estimate_steps(_job("mixtral-8x7b", 256, 4096), system, layout)
    skewed = estimate_steps(_job("mixtral-8x7b", 256, 4096, moe_imbalance=1.3), system, layout)
    assert float(skewed.ep_comm_exposed_s[0]) > float(balanced.ep_comm_exposed_s[0])
    assert float(skewed.compute_s[0]) > float(balanced.compute_s[0])


def test_zero3_gathers_per_weight_under_deepspeed_pay_latency_that_grows_with_nodes(db) -> None:
    # DeepSpeed gathers each weight matrix on its own, FSDP one flat unit per layer: the same bytes, more
    # collectives, each with the ring's latency, which grows with the nodes the data-parallel group spans.
    from dataclasses import replace

    from linkscope.model.step.train import zero3_collectives

    def dp_share(framework: str, gpus: int) -> float:
        job = replace(_job("gpt3-175b", gpus, 2048), framework=framework)
        lay = single_layout(tp=1, pp=1, dp=gpus, mb=1, recompute="full", zero=3)
        est = estimate_steps(job, db.systems["dgx-a100"].with_gpus(gpus), lay)
        return float(est.dp_comm_exposed_s[0] / est.step_time_s[0])

    assert zero3_collectives(replace(_job("gpt3-175b", 8), framework="deepspeed")) == 4
    assert zero3_collectives(_job("gpt3-175b", 8)) == 1
    assert dp_share("deepspeed", 384) > dp_share("fsdp", 384)
    assert dp_share("deepspeed", 2048) > dp_share("deepspeed", 512) > dp_share("deepspeed", 128)


def test_zero3_first_gather_and_last_reduce_scatter_always_show(db) -> None:
    # Even with every overlapped collective hidden, nothing precedes the first layer's gather in forward and
    # nothing follows the last reduce-scatter in backward.
    from linkscope.model.step.compute import compute_constants, constants_override

    job = _job("llama2-7b", 64, 4096)
    system = db.systems["dgx-h100"].with_gpus(16)
    lay = single_layout(tp=1, pp=1, dp=16, mb=4, recompute="full", zero=3)
    with constants_override(compute_constants().model_copy(update={"zero3_overlap": 1.0})):
        est = estimate_steps(job, system, lay)
    assert float(est.dp_comm_exposed_s[0]) > 0.0


def test_pipelined_zero2_runs_under_fsdp_not_deepspeed() -> None:
    # DeepSpeed's pipeline engine takes ZeRO stages 0 and 1 only; a pipelined ZeRO-2 layout is FSDP's, whose
    # reduce-scatters overlap backward.
    from linkscope.model.step.job import framework_for
    from linkscope.model.step.train import dp_overlap_of

    assert framework_for("auto", 2) == "deepspeed" and framework_for("auto", 2, pp=4) == "fsdp"
    assert framework_for("deepspeed", 2, pp=4) == "deepspeed"
    job = _job("llama2-70b", 64)
    assert dp_overlap_of(job, np.asarray([2, 2]), np.asarray([1, 4])).tolist() == [False, True]


def test_uneven_pipeline_stages_still_interleave(db) -> None:
    # 126 layers on 16 stages: the deepest holds 8, in chunks of 1, 2 or 4 layers (the first and last hold fewer).
    job = _job("llama3.1-405b", 2048, 8192)
    system = db.systems["dgx-h100"].with_gpus(8192)
    p = predict_train(job, system, LayoutRequest(tp=8, pp=16, interleave=8, micro_batch=1, recompute="none"))
    assert p.parallelism.interleave == 8 and p.parallelism.pp == 16


def test_moe_layers_add_their_fixed_time_per_micro_batch_not_per_token(db) -> None:
    from linkscope.model.comm.moe import moe_constants
    from linkscope.model.fidelity.moe_fit import overhead_override

    system = db.systems["hgx-b200"]
    m = model_presets()["qwen3-30b-a3b"]
    c = moe_constants()
    # One layer's forward: its own part and one part per local expert (128 experts over ep 8: 16).
    fixed_s = (c.moe_layer_overhead_us + c.moe_expert_overhead_us * m.experts / 8) * 1e-6
    assert c.moe_layer_overhead_us > 0 and c.moe_expert_overhead_us > 0

    def added_s(mb: int) -> float:
        layout = single_layout(tp=1, pp=1, dp=8, mb=mb, zero=1, ep=8)
        job = _job("qwen3-30b-a3b", 512, 4096)
        with_fixed = estimate_steps(job, system, layout)
        with overhead_override((0.0, 0.0)):
            without = estimate_steps(job, system, layout)
        # Its own line of the breakdown: compute is the same with or without it.
        assert float(with_fixed.compute_s[0]) == pytest.approx(float(without.compute_s[0]), rel=1e-9)
        assert sum(getattr(with_fixed, k)[0] for k in BREAKDOWN_KEYS) == pytest.approx(
            float(with_fixed.step_time_s[0]), rel=1e-9)
        assert float(with_fixed.step_time_s[0] - without.step_time_s[0]) == pytest.approx(
            float(with_fixed.moe_fixed_s[0]), rel=1e-9)
        return float(with_fixed.moe_fixed_s[0])

    # Forward once, backward twice (a data and a weight gradient kernel per forward GEMM), every MoE layer of
    # every micro-batch: four times the micro-batches at micro-batch 4 pay a quarter of it.
    micro_batches = 512 // 8
    assert added_s(1) == pytest.approx(3 * fixed_s * m.moe_layers * micro_batches, rel=1e-9)
    assert added_s(4) == pytest.approx(added_s(1) / 4, rel=1e-9)
    dense = estimate_steps(_job("llama2-7b", 64, 4096), system, single_layout(tp=1, pp=1, dp=8, zero=1))
    assert float(dense.moe_fixed_s[0]) == 0.0


def test_zero3_of_an_moe_model_gathers_only_the_gpus_own_experts(db) -> None:
    # NeMo AutoModel's DeepSeek-V3 on 256 H100 (FSDP over the 64 data-parallel ranks, EP 64): each GPU holds 4 of
    # the 256 experts, so its per-layer gathers and its gathered working set are its own experts, not all of them.
    system = db.systems["dgx-h100"].with_gpus(256)
    job = _job("deepseek-v3", 512, 4096, moe_dispatcher="deepep")
    narrow = estimate_steps(job, system, single_layout(tp=1, pp=4, dp=64, v=8, mb=1, zero=3, ep=8))
    wide = estimate_steps(job, system, single_layout(tp=1, pp=4, dp=64, v=8, mb=1, zero=3, ep=64))
    assert float(wide.dp_comm_exposed_s[0]) < float(narrow.dp_comm_exposed_s[0])
    assert float(wide.memory_gib_per_gpu[0]) < float(narrow.memory_gib_per_gpu[0])
    # The published step is 8.18 s; gathering every expert over dp made it several times that.
    assert float(wide.step_time_s[0]) == pytest.approx(8.18, rel=0.15)


def test_attention_core_counts_heads_times_head_dim_not_the_hidden_size(db) -> None:
    from linkscope.model.step.train import _attention_core_width

    # Qwen3-30B-A3B: 32 heads x 128 = 4096, twice its hidden size of 2048.
    assert _attention_core_width(model_presets()["qwen3-30b-a3b"]) == 4096
    # DeepSeek-V3's latent attention: 128 heads x (128 + 64 rotary) for QK^T and x 128 for scores x V.
    assert _attention_core_width(model_presets()["deepseek-v3"]) == 128 * (192 + 128) / 2
    # A model whose heads span the hidden size is unchanged.
    m = model_presets()["llama2-70b"]
    assert _attention_core_width(m) == m.hidden


def test_the_triton_attention_kernel_is_fused_but_slower_most_of_all_on_hopper(db) -> None:
    # MPT-1B at a long sequence, where the attention core weighs: FlashAttention's Triton kernel skips the
    # score matrix like the generation-tuned kernel (same memory, no selective recompute), but reaches less of
    # peak, and on Hopper less again (it issues pre-Hopper instructions).
    def step(system: str, attention: str, recompute: str = "none") -> tuple[float, float]:
        job = _job("mpt-1b", 32, 8192, attention=attention)
        est = estimate_steps(job, db.systems[system], single_layout(tp=1, pp=1, dp=8, mb=1, zero=3,
                                                                    recompute=recompute))
        return float(est.step_time_s[0]), float(est.memory_gib_per_gpu[0])

    for system in ("dgx-a100", "dgx-h100"):
        (flash_s, flash_gib), (triton_s, triton_gib) = step(system, "flash"), step(system, "triton")
        unfused_gib = step(system, "unfused")[1]
        assert triton_s > flash_s and triton_gib == flash_gib < unfused_gib
        assert step(system, "triton", "selective")[0] == pytest.approx(triton_s)
    slower = {s: step(s, "triton")[0] / step(s, "flash")[0] for s in ("dgx-a100", "dgx-h100")}
    assert slower["dgx-h100"] > slower["dgx-a100"] > 1.0


def test_predict_train_takes_the_triton_attention_kernel_and_refuses_an_unknown_one() -> None:
    base = ["predict", "train", "-s", "dgx-h100", "-m", "mpt-1b", "--gpus", "8", "--tp", "1", "--pp", "1",
            "--global-batch", "64", "--seq-len", "8192", "--json"]
    flash = json.loads(run_cli(*base).output)
    triton = json.loads(run_cli(*base, "--attention", "triton").output)
    assert triton["step_time_s"] > flash["step_time_s"]
    bad = run_cli(*base, "--attention", "fa4")
    assert bad.exit_code == 2 and "--attention: 'fa4' is not one of flash, flash2, triton, unfused" in bad.output


def test_deepspeed_zero_2_or_3_with_pipeline_stages_is_refused_and_never_searched() -> None:
    from tests.cli.helpers import run_cli

    for zero in ("2", "3"):
        refused = run_cli("predict", "train", "-s", "dgx-h100", "--gpus", "64", "-m", "llama2-70b", "--framework",
                          "deepspeed", "--zero", zero, "--pp", "4")
        assert refused.exit_code == 2 and "ZeRO stages 0-1 only" in refused.output
        searched = run_cli("predict", "train", "-s", "dgx-h100", "--gpus", "64", "-m", "llama2-70b", "--framework",
                           "deepspeed", "--zero", zero, "--json")
        assert searched.exit_code == 0, searched.output
        assert __import__("json").loads(searched.stdout)["parallelism"]["pp"] == 1


def test_a_searchs_collectives_priced_once_per_shape_are_what_each_layout_would_get() -> None:
    from linkscope.model.comm.collectives import collective_time
    from linkscope.model.comm.tiers import comm_tiers
    from linkscope.model.step.train import _coll_vector_s

    system = load_db(include_user=False).systems["dgx-h100"].with_gpus(64)
    rng = np.random.default_rng(7)
    size = rng.choice([1e3, 3.5e6, 2.0**27, 7.25e8], 500)
    ranks = rng.choice([2.0, 8.0, 16.0, 64.0], 500)
    nodes = np.where(ranks > 8, ranks / 8, 1.0)
    for op in ("all_reduce", "all_gather", "sendrecv"):
        alone = collective_time(op, comm_tiers(system), size, ranks, nodes, labels=False).time_us * 1e-6
        assert np.array_equal(_coll_vector_s(op, comm_tiers(system), size, ranks, nodes), alone)


@pytest.mark.parametrize("ranks", [[2.0, 2.0, 8.0, 8.0, 2.0], [2.5, 2.5, 8.0, 0.5, 2.5], [1e9, 2.0, 1e9, 3.0, 2.0],
                                   [4e18, 2.0, 4e18, 9e18, 2.0]])
def test_distinct_rows_map_every_row_to_an_equal_one(ranks: list[float]) -> None:
    from linkscope.model.step.train import _distinct_rows

    size = np.array([1.0, 1.0, 1.0, 2.5, 1.0] * 4)
    r = np.array(ranks * 4)
    nodes = np.array([1.0, 1.0, 2.0, 1.0, 1.0] * 4)
    first, inverse = _distinct_rows(size, r, nodes)
    rows = np.stack([size, r, nodes], axis=1)
    assert np.array_equal(rows[first][inverse], rows)
    assert len(first) == len(np.unique(rows, axis=0))
