"""Inference model: seed 001's NVSwitch vs point-to-point comparison, budgets, and the scaling study."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.step.compute import compute_constants
from linkscope.model.step.infer import InferJob, best_batch_for_budget, estimate_inference, prefill_chunk_steps
from linkscope.model.calibration.systems import ResolvedSystem
from linkscope.model.step.scaling import SUPERLINEAR_EFFICIENCY, node_counts, predict_scaling
from linkscope.model.step.predict import predict_train
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import model_presets
from tests.cli.helpers import run_cli


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def _throughput_at_budget(db, system: str, budget: float) -> float:
    job = InferJob(model=model_presets()["llama3.1-70b"], tp=2, pp=1, input_tokens=8192, output_tokens=256)
    est = estimate_inference(job, db.systems[system], np.arange(1, 513))
    i = best_batch_for_budget(est, budget)
    assert i is not None
    assert est.tokens_per_s_per_user[i] >= budget and est.fits[i]
    return float(est.tokens_per_s_per_gpu[i])


def test_seed_001_nvswitch_serves_more_than_a_mesh_at_30_tokens_per_user(db) -> None:
    # Seed 001 (NVIDIA, Llama 3.1 70B, TP2): about 115 vs 80 tokens/s/GPU at 30 tokens/s/user.
    switch = _throughput_at_budget(db, "hgx-h200", 30)
    mesh = _throughput_at_budget(db, "p2p-mesh-h200", 30)
    assert 1.15 < switch / mesh < 2.0


def test_prefill_all_reduce_carries_the_prompt(db) -> None:
    job = InferJob(model=model_presets()["llama3.1-70b"], tp=2, pp=1, input_tokens=8192, output_tokens=256)
    mesh = estimate_inference(job, db.systems["p2p-mesh-h200"], np.asarray([1]))
    switch = estimate_inference(job, db.systems["hgx-h200"], np.asarray([1]))
    assert mesh.tp_comm_prefill_s[0] == pytest.approx(7 * switch.tp_comm_prefill_s[0], rel=0.1)


def test_bigger_batches_trade_user_speed_for_throughput(db) -> None:
    job = InferJob(model=model_presets()["llama2-13b"], tp=1, pp=1, input_tokens=1024, output_tokens=256)
    est = estimate_inference(job, db.systems["hgx-h200"], np.asarray([1, 8, 64]))
    assert np.all(np.diff(est.tokens_per_s_per_user) < 0)
    assert np.all(np.diff(est.tokens_per_s_per_gpu) > 0)


def test_predict_infer_cli() -> None:
    result = run_cli("predict", "infer", "--system", "hgx-h200", "--model", "llama3.1-70b", "--tp", "2",
                     "--input-tokens", "8192", "--output-tokens", "256", "--latency-budget", "30", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tokens_per_s_per_user"] >= 30 and data["batch"] > 1
    assert {"prefill_s", "decode_step_s", "tokens_per_s_per_gpu", "tp_allreduce_share_decode"} <= set(data)
    impossible = run_cli("predict", "infer", "--system", "pcie-4090", "--model", "llama2-7b", "--input-tokens",
                         "512", "--output-tokens", "64", "--latency-budget", "100000")
    assert impossible.exit_code == 2 and "no batch meets" in impossible.stderr


SEED_001_JOB = ("predict", "infer", "-s", "hgx-h200", "-m", "llama3.1-70b", "--tp", "2", "--input-tokens", "8192",
                "--output-tokens", "256", "--latency-budget", "30", "--precision", "fp8")


@pytest.mark.parametrize("mode", [[], ["--no-prefill-interference"], ["--batch", "16"],
                                  ["--batch", "16", "--no-prefill-interference"]])
def test_per_user_speed_is_one_over_the_printed_time_per_output_token(mode: list[str]) -> None:
    args = list(SEED_001_JOB) if "--batch" not in mode else [a for a in SEED_001_JOB[:-4]] + ["--precision", "fp8"]
    result = run_cli(*args, *mode, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tokens_per_s_per_user"] * data["tpot_s"] == pytest.approx(1.0, rel=1e-9)
    assert data["time_per_output_token_s"] == data["tpot_s"] and data["ttft_s"] > 0
    assert data["prefill_interference"] is ("--no-prefill-interference" not in mode)
    # A GPU's throughput follows from the same time per token: batch tokens per TPOT over the replica's GPUs.
    assert data["tokens_per_s_per_gpu"] == pytest.approx(data["batch"] / data["tpot_s"] / 2, rel=1e-9)


def test_the_budget_counts_other_users_prefills_unless_asked_not_to() -> None:
    # Seed 001's figures (115 tokens/s/GPU at 30 tokens/s/user on TP2) imply a batch of about 6-9 per replica.
    shared = json.loads(run_cli(*SEED_001_JOB, "--json").stdout)
    decode_only = json.loads(run_cli(*SEED_001_JOB, "--no-prefill-interference", "--json").stdout)
    assert 4 <= shared["batch"] <= 12 and shared["tokens_per_s_per_user"] >= 30
    assert decode_only["batch"] > 2 * shared["batch"]
    assert decode_only["tpot_s"] == pytest.approx(decode_only["decode_step_s"])
    text = run_cli(*SEED_001_JOB, "--no-prefill-interference").stdout
    assert "decode only" in text and "with other users' prefills" in run_cli(*SEED_001_JOB).stdout


def test_scaling_searches_each_count_as_predict_train_does(db) -> None:
    job = Job(model=model_presets()["llama2-7b"], global_batch=32, seq_len=4096)
    resolved = ResolvedSystem.plain(db.systems["dgx-a100"])
    points, note = predict_scaling(job, resolved, 4, LayoutRequest())
    assert [p.nodes for p in points] == [1, 2, 4] and note.startswith("baseline: 1 node")
    above = [str(p.nodes) for p in points if (p.efficiency or 0.0) > SUPERLINEAR_EFFICIENCY]
    assert ("efficiency above 100% at " + ", ".join(above) + " nodes") in note if above else ";" not in note
    assert points[0].speedup == pytest.approx(1.0)
    for p in points:
        alone = predict_train(replace(job, global_batch=p.global_batch), resolved.system.with_nodes(p.nodes),
                              LayoutRequest())
        assert p.step_time_s == alone.step_time_s and p.parallelism == alone.parallelism
    assert all(0.8 < (p.efficiency or 0.0) < 1.05 for p in points)
    assert points[-1].gpu_speedup == pytest.approx((points[-1].speedup or 0.0) * 8)


def test_a_count_where_nothing_fits_has_no_figures_and_speedup_starts_after_it(db) -> None:
    job = Job(model=model_presets()["llama2-70b"], global_batch=64, seq_len=4096)
    points, note = predict_scaling(job, ResolvedSystem.plain(db.systems["dgx-h100"]), 4, LayoutRequest())
    first = points[0]
    assert not first.fits and first.reason is not None and first.reason.startswith("does not fit in memory")
    assert (first.step_time_s, first.tokens_per_s, first.speedup, first.efficiency, first.parallelism) == \
        (None, None, None, None, None)
    assert points[1].fits and points[1].speedup == pytest.approx(2.0) and points[1].efficiency == pytest.approx(1.0)
    assert note.startswith("baseline: 2 nodes")


def test_efficiency_above_100_percent_is_explained_by_the_baseline_layout(db) -> None:
    job = Job(model=model_presets()["llama2-70b"], global_batch=1024, seq_len=4096)
    points, note = predict_scaling(job, ResolvedSystem.plain(db.systems["dgx-h100"]), 8, LayoutRequest())
    above = [p for p in points if (p.efficiency or 0.0) > SUPERLINEAR_EFFICIENCY]
    assert above, [p.efficiency for p in points]
    # Each count above 100% is named with what its layout changed from the baseline's.
    for p in above:
        assert p.parallelism is not None and points[1].parallelism is not None
        clause = note.split(f"efficiency above 100% at {p.nodes} nodes: ")[1].split(";")[0]
        base, here = points[1].parallelism, p.parallelism
        changed = [f for f in ("tp", "pp", "recompute") if getattr(here, f) != getattr(base, f)]
        assert changed and all(f"{f} {getattr(base, f)} -> {getattr(here, f)}" in clause for f in changed)
    assert f"(MFU {points[1].mfu:.0%} of {points[1].peak.label})" in note


def test_scaling_over_tcp_is_worse_than_over_infiniband(db) -> None:
    # 64 sequences leave room for data parallelism up to 8 nodes whatever replica layout the baseline picks.
    job = Job(model=model_presets()["llama2-13b"], global_batch=64, seq_len=4096)
    ib, _ = predict_scaling(job, ResolvedSystem.plain(db.systems["dgx-a100"]), 8, LayoutRequest(), strong=True)
    tcp, _ = predict_scaling(job, ResolvedSystem.plain(db.systems["pcie-l40s"]), 8, LayoutRequest(), strong=True)
    assert ib[-1].efficiency > tcp[-1].efficiency


def test_node_counts() -> None:
    assert node_counts(1) == [1]
    assert node_counts(6) == [1, 2, 4, 6]


def test_a_short_prompt_costs_at_least_one_weight_read(db) -> None:
    # 70B in bf16 on one H200: 141 GB of weights; a 1-token prompt has almost no FLOPs but must stream them.
    job = InferJob(model=model_presets()["llama3-70b"], tp=2, pp=1, input_tokens=1, output_tokens=16)
    est = estimate_inference(job, db.systems["hgx-h200"], np.asarray([1]))
    weights_s = 70.6e9 * 2 / 2 / (4.8e12 * compute_constants().decode_hbm("nvidia"))
    assert est.prefill_s[0] >= weights_s * 0.99


def test_decode_is_weight_bound_at_small_batch_and_compute_bound_at_large(db) -> None:
    job = InferJob(model=model_presets()["llama3-8b"], tp=1, pp=1, input_tokens=128, output_tokens=128,
                   precision="fp8")
    est = estimate_inference(job, db.systems["hgx-h200"], np.asarray([1, 2, 2048, 4096]))
    small = est.decode_step_s[1] / est.decode_step_s[0]
    large = est.decode_step_s[3] / est.decode_step_s[2]
    assert small < 1.05  # the weight read dominates: a second sequence is almost free
    assert large > 1.6  # the GEMMs over the batch dominate: twice the batch, nearly twice the step


def test_an_fp8_kv_cache_halves_the_cache_and_fits_twice_the_batch(db) -> None:
    from linkscope.model.step.infer import candidate_batches

    base = InferJob(model=model_presets()["llama3-8b"], tp=1, pp=1, input_tokens=2048, output_tokens=2048,
                    precision="fp8")
    fp8_kv = replace(base, kv_precision="fp8")
    system = db.systems["dgx-h100"]
    assert len(candidate_batches(fp8_kv, system)) == pytest.approx(2 * len(candidate_batches(base, system)), rel=0.05)


def test_chunked_prefill_rides_in_the_decode_steps_weight_reads(db) -> None:
    # A cycle costs less than its prefills and decode steps run one after another, and never less than
    # the decode steps alone.
    job = InferJob(model=model_presets()["llama3-70b"], tp=2, pp=1, input_tokens=2048, output_tokens=256,
                   precision="fp8")
    est = estimate_inference(job, db.systems["dgx-h100"], np.asarray([1, 8, 64]))
    serial = est.batch * est.prefill_s + job.output_tokens * est.decode_step_s
    assert np.all(est.cycle_s < serial)
    assert np.all(est.cycle_s > job.output_tokens * est.decode_step_s)


def test_a_prompt_enters_in_chunks_of_the_engines_token_budget() -> None:
    # A 20,000-token prompt under an 8,192-token budget takes three steps; a 500-token one takes one; there are
    # never more chunk-carrying steps than decode steps in the cycle.
    assert compute_constants().prefill_chunk_tokens == 8192
    long = InferJob(model=model_presets()["llama3-70b"], tp=1, pp=1, input_tokens=20000, output_tokens=2000)
    short = replace(long, input_tokens=500)
    assert prefill_chunk_steps(long, np.asarray([20.0]))[0] == 60
    assert prefill_chunk_steps(short, np.asarray([20.0]))[0] == 20
    assert prefill_chunk_steps(short, np.asarray([4000.0]))[0] == 2000


def test_long_prompts_at_small_batch_hide_only_a_few_weight_reads(db) -> None:
    # 20,000-token prompts on one H200 in FP8 at batch 20: decode steps leave most of their weight read idle, but
    # a prompt rides in only its three chunk steps, so its GEMMs hide three reads, not one per decode step. The
    # cycle is then close to the prefills and the decode steps run one after another.
    job = InferJob(model=model_presets()["llama3-70b"], tp=1, pp=1, input_tokens=20000, output_tokens=2000,
                   precision="fp8", kv_precision="fp8")
    est = estimate_inference(job, db.systems["hgx-h200"], np.asarray([20]))
    serial = float(est.batch[0] * est.prefill_s[0] + job.output_tokens * est.decode_step_s[0])
    read_s = 70e9 / (4.8e12 * compute_constants().decode_hbm("nvidia"))  # one read of the FP8 weights
    hidden = serial - float(est.cycle_s[0])
    assert 0 < hidden < 60 * 1.5 * read_s


def test_serving_constants_fall_back_to_training_and_prior_values() -> None:
    c = compute_constants()
    # Blackwell has no serving evidence: the previous generation's serving share, as training shares fall back.
    assert c.infer_gemm_max("blackwell", "fp8") == c.infer_gemm_efficiency_by_arch["hopper:fp8"]
    # CDNA 4 walks back to CDNA 3 (AMD's own lineage), not to the A100 share.
    assert c.infer_gemm_max("cdna4", "bf16") == c.infer_gemm_efficiency_by_arch["cdna3:fp8"]
    assert c.gemm_max("cdna4", "fp8") == c.gemm_efficiency_by_arch["cdna3:fp8"]
    assert c.infer_gemm_max("volta", "bf16") == c.gemm_max("volta", "bf16")  # no serving chain: training's
    assert c.infer_gemm_max("hopper", "fp8") == c.infer_gemm_efficiency_by_arch["hopper:fp8"]
    assert c.decode_hbm("cpu") == c.decode_hbm_efficiency
    assert c.decode_hbm("nvidia") == c.decode_hbm_measured_by_vendor["nvidia"]


def test_batch_one_decode_is_the_weight_read_plus_kernels_and_all_reduces(db) -> None:
    # Llama-3.1-70B FP8 on one H200: the step is one read of the 69.6 GB a token uses (the input embedding's
    # lookup reads one row) at the measured share of 4.8 TB/s, plus the layers' small kernels under CUDA-graph
    # replay and the KV read; the default engine overlaps its host loop, so no host time. At TP 2 each GPU
    # reads half and adds two all-reduces per layer, priced by the collective model.
    c = compute_constants()
    model = model_presets()["llama3.1-70b"]
    system = db.systems["hgx-h200"]
    weights_s = (model.total_params() - model.embedding_params()) / (4.8e12 * c.decode_hbm("nvidia"))
    fixed_s = c.forward_fixed_us(model.layers) * 1e-6
    one = InferJob(model=model, tp=1, pp=1, input_tokens=128, output_tokens=128, precision="fp8")
    step = estimate_inference(one, system, np.asarray([1]), prefill_interference=False).decode_step_s[0]
    assert weights_s + fixed_s < step < (weights_s + fixed_s) * 1.05
    two = estimate_inference(replace(one, tp=2), system, np.asarray([1]), prefill_interference=False)
    comm_s = two.tp_comm_decode_s[0]
    assert comm_s > 0
    assert weights_s / 2 + fixed_s + comm_s < two.decode_step_s[0] < (weights_s / 2 + fixed_s + comm_s) * 1.05


def test_a_fixed_batch_latency_is_one_batched_prefill_and_the_decode_steps(db) -> None:
    from linkscope.model.fidelity.evidence import InferenceEntry
    from linkscope.model.fidelity.evidence_predict import predicted
    from linkscope.model.step.infer import batched_prefill_s

    entry = InferenceEntry(source="s", system="hgx-h200", model="llama3-8b", tp=1, batch=8, input_tokens=32,
                           output_tokens=128, metric="batch_latency_s", value=1.0, where="w")
    job = InferJob(model=model_presets()["llama3-8b"], tp=1, pp=1, input_tokens=32, output_tokens=128)
    system = db.systems["hgx-h200"]
    step = estimate_inference(job, system, np.asarray([8])).decode_step_s[0]
    assert predicted(entry, db) == pytest.approx(batched_prefill_s(job, system, 8) + 127 * step)


def test_decode_gemm_time_does_not_grow_with_pipeline_stages() -> None:
    # The stages run one after another for each token, so all layers' GEMMs are done once per step, not pp times.
    from linkscope.model.comm.tiers import comm_tiers
    from linkscope.model.step import infer

    system = load_db().systems["dgx-h100"]
    m = model_presets()["llama3-70b"]
    batch = np.asarray([256.0])
    times = [infer._decode(infer.InferJob(model=m, tp=4, pp=pp, input_tokens=2048, output_tokens=512,
                                          precision="bf16"), system, comm_tiers(system), batch).gemm_s[0]
             for pp in (1, 2)]
    assert times[1] == pytest.approx(times[0])


def test_moe_decode_reads_more_experts_as_the_batch_grows() -> None:
    from linkscope.hardware.loader import load_db as _load_db
    from linkscope.model.step.infer import InferJob as _Job, _experts_touched_share, estimate_inference as _est
    from linkscope.model.step.transformer import model_presets as _presets

    m = _presets()["deepseek-v3"]
    assert _experts_touched_share(m, 1) == pytest.approx(8 / 256)
    assert float(_experts_touched_share(m, 64)) == pytest.approx(1 - (1 - 8 / 256) ** 64)
    system = _load_db(include_user=False).systems["hgx-h200"]
    est = _est(_Job(model=m, tp=8, pp=1, input_tokens=2048, output_tokens=512, precision="fp8"), system,
               np.asarray([1.0, 8.0, 64.0]))
    steps = est.decode_step_s
    # Batch 1 reads 8 of 256 experts per layer: far less than a full weight read, so far faster than batch 64.
    assert steps[0] < steps[1] < steps[2]
    assert steps[2] > 2 * steps[0]


def test_wide_expert_parallelism_spreads_experts_and_pays_all_to_all_per_layer() -> None:
    from linkscope.hardware.errors import UserError as _UserError
    from linkscope.hardware.loader import load_db as _load_db
    from linkscope.model.step.infer import InferJob as _Job, check_experts_fit, estimate_inference as _est
    from linkscope.model.step.transformer import model_presets as _presets

    db = _load_db(include_user=False)
    m = _presets()["deepseek-v3"]
    common = dict(model=m, pp=1, input_tokens=2048, output_tokens=512, precision="fp8")
    h200 = db.systems["hgx-h200"]
    tp8 = _est(_Job(tp=8, **common), h200, np.asarray([64.0]))
    ep8 = _est(_Job(tp=1, ep=8, **common), h200, np.asarray([64.0]))
    # Attention is replicated under wide EP, so each GPU holds more weights than under TP 8, but serves its own batch.
    assert float(ep8.memory_gib_per_gpu[0]) > float(tp8.memory_gib_per_gpu[0])
    assert float(ep8.tokens_per_s_per_gpu[0]) > float(tp8.tokens_per_s_per_gpu[0])
    # The same EP 64 inside one NVLink domain (an NVL72 rack) against across eight InfiniBand-joined nodes.
    rack = _est(_Job(tp=1, ep=64, **common), db.systems["gb200-nvl72"], np.asarray([128.0]))
    nodes = _est(_Job(tp=1, ep=64, **common), db.systems["hgx-b200"].with_gpus(64), np.asarray([128.0]))
    assert float(rack.decode_step_s[0]) < float(nodes.decode_step_s[0])
    with pytest.raises(_UserError, match="do not fit at ep 8"):
        check_experts_fit(_Job(tp=1, ep=8, **common), db.systems["dgx-h100"])
    with pytest.raises(_UserError, match="does not divide the 256 experts"):
        _est(_Job(tp=1, ep=3, **common), h200, np.asarray([1.0]))


def test_wide_ep_over_several_nodes_takes_the_range_of_a_multi_node_class(db) -> None:
    # One attention replica fits a GPU, but the expert group spans eight nodes: the range is that fabric's.
    from linkscope.model.step.infer import summary

    job = InferJob(model=model_presets()["deepseek-v3"], tp=1, pp=1, ep=64, input_tokens=2048, output_tokens=512,
                   precision="fp8")
    system = db.systems["dgx-h100"].with_gpus(64)
    data = summary(job, system, estimate_inference(job, system, np.asarray([32.0])), 0)
    assert "several nodes" in data["range_basis"] and "one node" not in data["range_basis"]


def test_a_serial_engine_adds_host_time_per_sequence_in_the_step(db) -> None:
    # vLLM V0 handled every sequence of a step in Python between GPU steps: its step is the overlapped engine's
    # plus decode_seq_host_us per sequence, for every batch size; prefill of n prompts adds n of them too.
    from linkscope.model.step.infer import DEFAULT_ENGINE, batched_prefill_s

    c = compute_constants()
    assert c.decode_seq_host_us > 0
    system = db.systems["hgx-h200"]
    job = InferJob(model=model_presets()["llama3-8b"], tp=1, pp=1, input_tokens=32, output_tokens=128)
    assert job.engine == DEFAULT_ENGINE == "overlapped"
    batches = np.asarray([1.0, 8.0, 64.0])
    fast = estimate_inference(job, system, batches, prefill_interference=False).decode_step_s
    slow = estimate_inference(replace(job, engine="serial"), system, batches, prefill_interference=False)
    assert slow.decode_step_s - fast == pytest.approx(batches * c.decode_seq_host_us * 1e-6)
    assert (batched_prefill_s(replace(job, engine="serial"), system, 8) - batched_prefill_s(job, system, 8)
            == pytest.approx(8 * c.decode_seq_host_us * 1e-6))


def test_an_unknown_engine_is_a_user_error_naming_it(db) -> None:
    job = InferJob(model=model_presets()["llama3-8b"], tp=1, pp=1, input_tokens=32, output_tokens=128,
                   engine="eager")
    with pytest.raises(UserError, match="eager"):
        estimate_inference(job, db.systems["hgx-h200"], np.asarray([1.0]))


def test_an_evidence_entry_names_a_known_engine() -> None:
    from pydantic import ValidationError

    from linkscope.model.fidelity.evidence import InferenceEntry

    fields = dict(source="s", system="hgx-h200", model="llama3-8b", tp=1, batch=8, input_tokens=32,
                  output_tokens=128, metric="batch_latency_s", value=1.0, where="w")
    assert InferenceEntry(**fields).engine == "overlapped"
    assert InferenceEntry(**fields, engine="serial").engine == "serial"
    with pytest.raises(ValidationError, match="engine 'eager'"):
        InferenceEntry(**fields, engine="eager")
