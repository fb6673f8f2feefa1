"""MoE model fields: validation on load and the presets' parameter counts against the published ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.model.step.transformer import load_model, model_presets

# (total, active) in billions as each model's paper or card states them (the presets' `source`).
PUBLISHED_B = {
    "mixtral-8x7b": (46.7, 12.9),
    "mixtral-8x22b": (141.0, 39.0),
    "deepseek-v3": (671.0, 37.0),
    "qwen3-235b-a22b": (235.0, 22.0),
    "qwen3-30b-a3b": (30.5, 3.3),
    "llama4-maverick": (400.0, 17.0),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_B))
def test_preset_total_and_active_params_match_the_published_counts(name: str) -> None:
    m = model_presets()[name]
    total_b, active_b = PUBLISHED_B[name]
    assert m.total_params() / 1e9 == pytest.approx(total_b, rel=0.02)
    assert m.active_params() / 1e9 == pytest.approx(active_b, rel=0.03)


def test_gpt_oss_counts_follow_its_card_which_leaves_out_the_input_embedding() -> None:
    m = model_presets()["gpt-oss-120b"]
    assert m.total_params() / 1e9 == pytest.approx(116.83, rel=0.01)
    assert (m.active_params() - m.embedding_params()) / 1e9 == pytest.approx(5.13, rel=0.01)


def test_deepseek_v3_layout_three_dense_layers_then_moe() -> None:
    m = model_presets()["deepseek-v3"]
    assert (m.moe_layers, m.experts, m.shared_experts, m.topk) == (58, 256, 1, 8)
    # Latent attention caches the 512-wide latent and the 64-wide rotary key per token and layer.
    assert 2 * m.kv_dim == 576


def test_llama4_alternates_moe_and_dense_layers() -> None:
    assert model_presets()["llama4-maverick"].moe_layers == 24


def test_dense_model_counts_are_unchanged() -> None:
    m = model_presets()["llama2-70b"]
    assert not m.is_moe
    assert m.active_params() == m.total_params()
    assert m.total_params() / 1e9 == pytest.approx(69.0, rel=0.01)


def test_moe_flops_follow_active_weights_not_total() -> None:
    m = model_presets()["mixtral-8x7b"]
    flops = m.model_flops_per_token(4096)
    assert 6 * m.active_params() < flops < 6 * m.total_params() / 2


def _write(tmp_path: Path, body: str) -> str:
    path = tmp_path / "m.yaml"
    path.write_text("layers: 4\nhidden: 256\nheads: 4\nvocab: 1000\nseq_len: 128\n" + body, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("body", "field", "words"), [
    ("experts: 8\nmoe_ffn_hidden: 512\n", None, "needs topk"),
    ("experts: 8\ntopk: 9\nmoe_ffn_hidden: 512\n", None, "topk 9 is larger than experts 8"),
    ("experts: 8\ntopk: 2\n", None, "needs moe_ffn_hidden"),
    ("topk: 2\n", None, "topk is given but experts is not"),
    ("experts: 8\ntopk: 2\nmoe_ffn_hidden: 512\nfirst_dense_layers: 4\n", None, "leave none of the 4 layers"),
    ("experts: 0\ntopk: 1\nmoe_ffn_hidden: 512\n", "experts", "greater than or equal to 1"),
])
def test_bad_moe_fields_name_the_field(tmp_path: Path, body: str, field: str | None, words: str) -> None:
    with pytest.raises(DataError) as err:
        load_model(_write(tmp_path, body))
    assert words in str(err.value)
    if field:
        assert field in str(err.value)


def test_head_dim_lets_heads_times_head_dim_differ_from_hidden(tmp_path: Path) -> None:
    m = load_model(_write(tmp_path, "head_dim: 128\nexperts: 8\ntopk: 2\nmoe_ffn_hidden: 512\n"))
    assert (m.head_dim, m.q_dim) == (128, 512)
    assert m.moe_layers == 4
