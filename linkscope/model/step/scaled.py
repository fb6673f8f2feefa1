"""Shrinking a model spec to fit a small machine: fewer layers, a narrower width, a smaller vocabulary or context.

The head width is kept where it fits (a narrower model has fewer heads, not thinner ones), the ratio of query to
KV heads is kept where it divides, and the MLP keeps its ratio to the width (rounded to a multiple of 8).
"""

from __future__ import annotations

from dataclasses import replace

from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import check_number
from linkscope.model.step.transformer import MAX_EXPERTS, MAX_LAYERS, MAX_SEQ_LEN, MAX_VOCAB, MAX_WIDTH, ModelConfig


def _check(value: int | None, flag: str, high: int) -> None:
    # The model file's own bounds: a larger figure would overflow numpy's integers, not describe a model.
    if value is not None and not 1 <= value <= high:
        raise UserError(f"{flag} must be from 1 to {high:,} (got {value})")


def scaled_model(m: ModelConfig, layers: int | None = None, hidden: int | None = None, heads: int | None = None,
                 vocab: int | None = None, seq_len: int | None = None) -> ModelConfig:
    """`m` with the given dimensions replaced; None keeps the model's own."""
    for value, flag, high in ((layers, "--layers", MAX_LAYERS), (hidden, "--hidden", MAX_WIDTH),
                              (heads, "--heads", MAX_WIDTH), (vocab, "--vocab", MAX_VOCAB),
                              (seq_len, "--seq-len", MAX_SEQ_LEN)):
        _check(value, flag, high)
    out = replace(m, layers=layers or m.layers, vocab=vocab or m.vocab, seq_len=seq_len or m.seq_len)
    if hidden is not None or heads is not None:
        out = _narrowed(m, out, hidden or m.hidden, heads)
    if out != m:
        out = replace(out, id=f"{m.id}-{out.layers}l-{out.hidden}h")
    return out


def _narrowed(m: ModelConfig, out: ModelConfig, width: int, heads: int | None) -> ModelConfig:
    n_heads = heads or max(1, width // m.head_dim)
    if width % n_heads:
        raise UserError(f"--hidden {width} is not a multiple of the {n_heads} attention heads; pass --heads")
    ratio = max(1, m.heads // m.kv_heads)
    kv_heads = n_heads // ratio if n_heads % ratio == 0 and n_heads >= ratio else n_heads
    ffn = max(8, round(m.ffn_hidden * width / m.hidden / 8) * 8)
    expert_ffn = max(8, round(m.moe_ffn_hidden * width / m.hidden / 8) * 8) if m.moe_ffn_hidden else 0
    return replace(out, hidden=width, heads=n_heads, kv_heads=kv_heads, ffn_hidden=ffn, moe_ffn_hidden=expert_ffn)


def with_experts(m: ModelConfig, experts: int | None, topk: int | None) -> ModelConfig:
    """`m` with routed experts of its MLP's width (`--experts E --topk K`); `m` itself when neither is given."""
    if experts is None and topk is None:
        return m
    if experts is None or topk is None:
        raise UserError("give --experts and --topk together")
    for value, flag in ((experts, "--experts"), (topk, "--topk")):
        check_number(value, flag, 1, MAX_EXPERTS)
    if topk > experts:
        raise UserError(f"--topk {topk} is larger than --experts {experts}")
    return replace(m, experts=experts, topk=topk, moe_ffn_hidden=m.moe_ffn_hidden or m.ffn_hidden,
                   id=f"{m.id}-{experts}e-top{topk}")
