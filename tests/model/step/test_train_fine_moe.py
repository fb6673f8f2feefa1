"""Fine-grained MoE in the training step: many small experts, a large top-k, a router over many experts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.comm.moe import moe_constants
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.fidelity.evidence import load_evidence
from linkscope.model.fidelity.moe_fit import moe_training_entries
from linkscope.model.step import train
from linkscope.model.step.compute import compute_constants
from linkscope.model.step.job import Job
from linkscope.model.step.layout import single_layout
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import ModelConfig, model_presets


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _ctx(db: HardwareDB, model: ModelConfig, ep: int = 8, mb: int = 1) -> train._Ctx:
    system = db.systems["dgx-h100"].with_gpus(8)
    job = Job(model=model, global_batch=64, seq_len=4096, precision="bf16")
    lay = single_layout(tp=1, pp=1, dp=8, mb=mb, zero=1, ep=ep)
    return train._Ctx(job=job, system=system, tiers=comm_tiers(system), c=compute_constants(), lay=lay,
                      tokens=lay.mb * job.seq_len / lay.cp)


def _f(value: object) -> float:
    return float(np.asarray(value).ravel()[0])


# Two MoE layers with the same active expert FLOPs per token: top-2 of 8 experts of width 4 x 768 against top-8 of
# 128 experts of width 768 (Qwen3-30B-A3B's), on the same hidden size and tokens.
FINE = model_presets()["qwen3-30b-a3b"]
COARSE = replace(FINE, experts=8, topk=2, moe_ffn_hidden=4 * FINE.moe_ffn_hidden)


def test_a_fine_grained_layers_grouped_gemm_is_slower_per_flop(db: HardwareDB) -> None:
    fine, coarse = _ctx(db, FINE), _ctx(db, COARSE)
    flops = 2 * fine.tokens * FINE.topk * FINE.ffn_matrices * FINE.hidden * FINE.moe_ffn_hidden
    assert flops == 2 * coarse.tokens * COARSE.topk * COARSE.ffn_matrices * COARSE.hidden * COARSE.moe_ffn_hidden
    # Each rank's 16 local experts see 2,048 tokens each; the top-2-of-8 rank's one expert sees 8,192: smaller
    # GEMMs reach less of the peak, so the same FLOPs take longer.
    fine_s = float(train._expert_gemms_s(fine)[0] - train._router_gemm_s(fine)[0])
    coarse_s = float(train._expert_gemms_s(coarse)[0] - train._router_gemm_s(coarse)[0])
    assert fine_s > 1.2 * coarse_s


def test_router_and_permutation_traffic_grow_with_topk_and_experts(db: HardwareDB) -> None:
    top2, top8 = _ctx(db, replace(FINE, topk=2)), _ctx(db, FINE)
    # Permutation moves every token copy: four times the copies at top-8.
    assert _f(train._permute_bytes(top8)) == pytest.approx(
        4 * _f(train._permute_bytes(top2)))
    # The router's scores are one per expert: 256 experts move twice 128's.
    wide = _ctx(db, replace(FINE, experts=256))
    assert _f(train._router_bytes(wide)) == pytest.approx(
        2 * _f(train._router_bytes(top8)))
    assert float(train._router_gemm_s(wide)[0]) > float(train._router_gemm_s(top8)[0])
    # A dense model has neither.
    dense = _ctx(db, model_presets()["llama2-7b"])
    assert train._permute_bytes(dense) == 0.0 and train._router_bytes(dense) == 0.0


def test_the_all_to_all_volume_grows_with_topk(db: HardwareDB) -> None:
    assert float(train._ep_comm_s(_ctx(db, FINE))[0]) > 2 * float(train._ep_comm_s(_ctx(db, replace(FINE, topk=2)))[0])


def test_the_fixed_time_grows_with_the_local_experts(db: HardwareDB) -> None:
    # Qwen3-30B-A3B on 8 GPUs: at EP 8 each GPU holds 16 experts, at EP 2 it holds 64; the layer's own part is
    # the same, the per-expert part four times larger.
    c = moe_constants()
    system = db.systems["dgx-h100"].with_gpus(8)
    job = Job(model=FINE, global_batch=64, seq_len=4096, precision="bf16")
    fixed = {ep: float(estimate_steps(job, system, single_layout(tp=1, pp=1, dp=8, mb=1, zero=1, ep=ep))
                       .moe_fixed_s[0]) for ep in (2, 8)}
    per_layer = (c.moe_layer_overhead_us + c.moe_expert_overhead_us * np.array([64, 16])) / c.moe_layer_overhead_us
    assert fixed[2] / fixed[8] == pytest.approx(per_layer[0] / per_layer[1], rel=1e-9)
    assert fixed[2] > fixed[8]


def test_the_h100_qwen3_235b_row_loads_with_its_recipe_layout() -> None:
    rows = [e for e in moe_training_entries(load_evidence())
            if e.model == "qwen3-235b-a22b" and e.system == "dgx-h100"]
    assert len(rows) == 1
    row = rows[0]
    assert (row.gpus, row.global_batch, row.tp, row.pp, row.interleave, row.ep, row.value) == \
        (256, 2048, 2, 8, 4, 32, 1575)
    assert row.moe_a2a_overlap and row.precision == "fp8"
    assert any("recipe" in a for a in row.assumed)
