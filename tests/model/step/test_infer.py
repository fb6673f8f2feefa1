"""Inference model: seed 001's NVSwitch vs point-to-point comparison, budgets, and the scaling study."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linkscope.hardware.loader import load_db
from linkscope.model.step.infer import InferJob, best_batch_for_budget, estimate_inference
from linkscope.model.step.scaling import node_counts, predict_scaling
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


def test_scaling_keeps_the_replica_layout_and_reports_efficiency(db) -> None:
    job = Job(model=model_presets()["llama2-7b"], global_batch=32, seq_len=4096)
    points, note = predict_scaling(job, db.systems["dgx-a100"], 4, LayoutRequest())
    assert [p.nodes for p in points] == [1, 2, 4] and note == "baseline: 1 node"
    assert points[0].speedup == pytest.approx(1.0)
    assert len({(p.parallelism.tp, p.parallelism.pp) for p in points}) == 1
    assert all(0.8 < p.efficiency < 1.05 for p in points)
    assert points[-1].gpu_speedup == pytest.approx(points[-1].speedup * 8)


def test_scaling_over_tcp_is_worse_than_over_infiniband(db) -> None:
    # 64 sequences leave room for data parallelism up to 8 nodes whatever replica layout the baseline picks.
    job = Job(model=model_presets()["llama2-13b"], global_batch=64, seq_len=4096)
    ib, _ = predict_scaling(job, db.systems["dgx-a100"], 8, LayoutRequest(), strong=True)
    tcp, _ = predict_scaling(job, db.systems["pcie-l40s"], 8, LayoutRequest(), strong=True)
    assert ib[-1].efficiency > tcp[-1].efficiency


def test_node_counts() -> None:
    assert node_counts(1) == [1]
    assert node_counts(6) == [1, 2, 4, 6]
