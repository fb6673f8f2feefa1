"""Transformer shapes (presets or a user's YAML/JSON file) and their parameter and FLOP counts.

FLOPs follow Korthikanti et al. 2022 / Narayanan et al. 2021: per token and layer, forward matmuls cost
2 x (weights touched) plus 4 s h for attention scores and values (the full s x s matrix, as Megatron's MFU
convention counts it); backward costs twice the forward. Gated MLPs (SwiGLU) have three FFN matrices.

Mixture-of-experts models replace the MLP of their MoE layers by `experts` routed experts of width `moe_ffn_hidden`
(plus `shared_experts` every token goes through) and a router; a token's matmuls touch `topk` routed experts only,
so FLOPs follow the active weights and memory the total. The first `first_dense_layers` layers, and all but every
`moe_layer_interval`-th layer after them (Llama 4 alternates), keep a dense MLP of width `ffn_hidden`. Multi-head
latent attention (DeepSeek-V2/V3) is described by its low-rank widths.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from linkscope.hardware import built_cache
from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import parse_yaml, parse_yaml_text, read_data_text

PRESETS_FILE = Path(__file__).parents[1] / "data" / "models.yaml"


MAX_LAYERS = 100_000
MAX_WIDTH = 10_000_000
MAX_VOCAB = 100_000_000
MAX_SEQ_LEN = 100_000_000
MAX_EXPERTS = 100_000


class ModelEntry(BaseModel):
    """A model file's fields, validated at the edge."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    id: str = ""
    aliases: list[str] = []
    # Upper bounds are far beyond any real model; they keep the layout search fast and the numbers finite.
    layers: int = Field(ge=1, le=MAX_LAYERS, strict=True)
    hidden: int = Field(ge=1, le=MAX_WIDTH, strict=True)
    heads: int = Field(ge=1, le=MAX_WIDTH, strict=True)
    kv_heads: int | None = Field(default=None, ge=1, le=MAX_WIDTH, strict=True)
    ffn_hidden: int | None = Field(default=None, ge=1, le=MAX_WIDTH, strict=True)
    vocab: int = Field(ge=1, le=MAX_VOCAB, strict=True)
    seq_len: int = Field(ge=1, le=MAX_SEQ_LEN, strict=True)
    gated_mlp: bool = False
    dropout: bool = True
    head_dim: int | None = Field(default=None, ge=1, le=MAX_WIDTH, strict=True)
    experts: int | None = Field(default=None, ge=1, le=MAX_EXPERTS, strict=True)
    topk: int | None = Field(default=None, ge=1, le=MAX_EXPERTS, strict=True)
    moe_ffn_hidden: int | None = Field(default=None, ge=1, le=MAX_WIDTH, strict=True)
    shared_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS, strict=True)
    first_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS, strict=True)
    moe_layer_interval: int = Field(default=1, ge=1, le=MAX_LAYERS, strict=True)
    q_lora_rank: int | None = Field(default=None, ge=1, le=MAX_WIDTH, strict=True)
    kv_lora_rank: int | None = Field(default=None, ge=1, le=MAX_WIDTH, strict=True)
    qk_rope_head_dim: int = Field(default=0, ge=0, le=MAX_WIDTH, strict=True)
    v_head_dim: int | None = Field(default=None, ge=1, le=MAX_WIDTH, strict=True)
    source: str = ""
    as_of: Any = None

    @model_validator(mode="after")
    def _shapes_agree(self) -> ModelEntry:
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}; give head_dim")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        self._moe_agrees()
        return self

    def _moe_agrees(self) -> None:
        moe_only = {"topk": self.topk, "moe_ffn_hidden": self.moe_ffn_hidden,
                    "shared_experts": self.shared_experts or None,
                    "first_dense_layers": self.first_dense_layers or None}
        if self.experts is None:
            given = [name for name, value in moe_only.items() if value is not None]
            if given:
                raise ValueError(f"{given[0]} is given but experts is not (a mixture-of-experts model needs experts)")
            return
        if self.topk is None:
            raise ValueError(f"an MoE model (experts {self.experts}) needs topk, the experts each token is routed to")
        if self.topk > self.experts:
            raise ValueError(f"topk {self.topk} is larger than experts {self.experts}")
        if self.moe_ffn_hidden is None:
            raise ValueError(f"an MoE model (experts {self.experts}) needs moe_ffn_hidden, the width of one expert")
        if self.first_dense_layers + self.moe_layer_interval > self.layers:
            raise ValueError(f"first_dense_layers {self.first_dense_layers} and moe_layer_interval "
                             f"{self.moe_layer_interval} leave none of the {self.layers} layers MoE")


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer, dense or mixture-of-experts (`experts` > 0)."""

    id: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    gated_mlp: bool
    attn_head_dim: int | None = None
    dropout: bool = True
    """Trains with dropout: each layer keeps its two dropout masks (after attention and after the MLP) for
    backward. A dropout probability of 0 keeps no mask (PyTorch's dropout returns its input)."""
    experts: int = 0
    topk: int = 0
    moe_ffn_hidden: int = 0
    shared_experts: int = 0
    first_dense_layers: int = 0
    moe_layer_interval: int = 1
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def head_dim(self) -> int:
        """Width of one attention head (hidden / heads unless the model file gives head_dim)."""
        return self.attn_head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of Q and of the attention output: heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): kv_heads x head_dim; for latent attention the cached latent and rotary key."""
        if self.kv_lora_rank:
            return (self.kv_lora_rank + self.qk_rope_head_dim) // 2
        return self.kv_heads * self.head_dim

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices in the MLP: 3 for gated (SwiGLU), 2 otherwise."""
        return 3 if self.gated_mlp else 2

    @property
    def is_moe(self) -> bool:
        """Whether the model has routed experts."""
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is routed experts."""
        if not self.is_moe:
            return 0
        return len(range(self.first_dense_layers + self.moe_layer_interval - 1, self.layers, self.moe_layer_interval))

    def attention_params(self) -> int:
        """Weights of one layer's attention (Q, K, V, output), latent attention's down/up projections included."""
        if not self.kv_lora_rank:
            return self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        v_dim = self.v_head_dim or self.head_dim
        qk_head = self.head_dim + self.qk_rope_head_dim
        q = (self.hidden * self.q_lora_rank + self.q_lora_rank * self.heads * qk_head if self.q_lora_rank
             else self.hidden * self.heads * qk_head)
        kv = (self.hidden * (self.kv_lora_rank + self.qk_rope_head_dim)
              + self.kv_lora_rank * self.heads * (self.head_dim + v_dim))
        return q + kv + self.heads * v_dim * self.hidden

    def expert_params(self) -> int:
        """Weights of one expert's MLP."""
        return self.ffn_matrices * self.hidden * self.moe_ffn_hidden

    def _mlp_params(self, routed: int) -> tuple[int, int]:
        """(dense layer MLP, MoE layer MLP with `routed` routed experts counted) weights."""
        dense = self.ffn_matrices * self.hidden * self.ffn_hidden
        if not self.is_moe:
            return dense, dense
        router = self.experts * self.hidden
        return dense, (routed + self.shared_experts) * self.expert_params() + router

    def _layers_params(self, routed: int) -> int:
        dense_mlp, moe_mlp = self._mlp_params(routed)
        per_layer_fixed = self.attention_params() + 4 * self.hidden
        moe = self.moe_layers
        return self.layers * per_layer_fixed + (self.layers - moe) * dense_mlp + moe * moe_mlp

    def layer_params(self) -> int:
        """Weights of one transformer layer (attention + MLP + two norms, biases ignored); for an MoE model the
        mean over layers of all weights, experts included (what memory and gradient traffic carry)."""
        return self._layers_params(self.experts) // self.layers

    def active_layer_params(self) -> int:
        """Weights one token's matmuls touch in an average layer (its topk routed experts, not all of them)."""
        return self._layers_params(self.topk) // self.layers

    def expert_layer_params(self) -> int:
        """Routed expert weights of one MoE layer (what expert parallelism shards); 0 for a dense model."""
        return self.experts * self.expert_params() if self.is_moe else 0

    def expert_params_per_layer(self) -> float:
        """Routed expert weights of an average layer (what expert parallelism shards instead of tensor parallelism)."""
        return self.moe_layers * self.expert_layer_params() / self.layers

    def mean_ffn_width(self) -> float:
        """MLP intermediate width a token passes through in an average layer (topk routed plus shared experts in
        MoE layers), what activation memory and element-wise traffic scale with."""
        if not self.is_moe:
            return float(self.ffn_hidden)
        moe = self.moe_layers / self.layers
        return (1 - moe) * self.ffn_hidden + moe * (self.topk + self.shared_experts) * self.moe_ffn_hidden

    def embedding_params(self) -> int:
        """Input embedding; the output projection is a second matrix of the same size."""
        return self.vocab * self.hidden

    def total_params(self) -> int:
        """All weights, with untied input and output embeddings."""
        return self._layers_params(self.experts) + 2 * self.embedding_params()

    def active_params(self) -> int:
        """Weights used per token: every layer's attention, shared and topk routed experts, and both embeddings,
        the convention of the Mixtral, DeepSeek-V3, Qwen3 and Llama 4 counts (gpt-oss's card leaves out the input
        embedding)."""
        return self._layers_params(self.topk) + 2 * self.embedding_params()

    def layer_matmul_flops_per_token(self) -> int:
        """Forward matmul FLOPs of one layer for one token, excluding attention scores/values."""
        return 2 * (self.active_layer_params() - 4 * self.hidden)

    def attention_flops_per_token(self, seq_len: int) -> int:
        """Forward FLOPs of QK^T and (scores)V for one token over the full sequence."""
        return 4 * seq_len * self.q_dim

    def model_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward + backward, no recomputation): the MFU numerator."""
        per_layer = self.layer_matmul_flops_per_token() + self.attention_flops_per_token(seq_len)
        logits = 2 * self.hidden * self.vocab
        return 3.0 * (self.layers * per_layer + logits)


def _entry_to_config(entry: ModelEntry, default_id: str) -> ModelConfig:
    return ModelConfig(id=entry.id or default_id, layers=entry.layers, hidden=entry.hidden, heads=entry.heads,
                       kv_heads=entry.kv_heads or entry.heads, ffn_hidden=entry.ffn_hidden or 4 * entry.hidden,
                       vocab=entry.vocab, seq_len=entry.seq_len, gated_mlp=entry.gated_mlp,
                       attn_head_dim=entry.head_dim, dropout=entry.dropout, experts=entry.experts or 0,
                       topk=entry.topk or 0,
                       moe_ffn_hidden=entry.moe_ffn_hidden or 0, shared_experts=entry.shared_experts,
                       first_dense_layers=entry.first_dense_layers, moe_layer_interval=entry.moe_layer_interval,
                       q_lora_rank=entry.q_lora_rank or 0, kv_lora_rank=entry.kv_lora_rank or 0,
                       qk_rope_head_dim=entry.qk_rope_head_dim, v_head_dim=entry.v_head_dim or 0)


def _validate(raw: Any, file: str, label: str) -> ModelEntry:
    try:
        return ModelEntry.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(map(str, err["loc"])) or None
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        raise DataError(file, msg, entry=label, field=field) from None


@functools.cache
def model_presets() -> dict[str, ModelConfig]:
    """The packaged model presets by id and alias (kept validated between starts)."""
    return built_cache.cached("models", [PRESETS_FILE], (Path(__file__),), _validated_presets)


def _validated_presets() -> dict[str, ModelConfig]:
    raw = parse_yaml(PRESETS_FILE.read_text(encoding="utf-8"))
    presets: dict[str, ModelConfig] = {}
    for item in raw["models"]:
        entry = _validate(item, str(PRESETS_FILE), item.get("id", "?"))
        config = _entry_to_config(entry, entry.id)
        for name in (entry.id, *entry.aliases):
            presets[name] = config
    return presets


def load_model(spec: str) -> ModelConfig:
    """`--model`: a preset id, or a YAML/JSON file with layers, hidden, heads, [kv_heads], [ffn_hidden], vocab,
    seq_len, gated_mlp, [head_dim], [dropout] and for MoE experts, topk, moe_ffn_hidden, [shared_experts],
    [first_dense_layers], [moe_layer_interval]."""
    presets = model_presets()
    if spec in presets:
        return presets[spec]
    path = Path(spec)
    if path.suffix in (".yaml", ".yml", ".json") or path.is_file():
        return _load_model_file(path)
    close = difflib.get_close_matches(spec, list(presets), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f" (presets: {', '.join(sorted(presets))})"
    raise UserError(f"unknown model '{spec}'{hint}", field="model")


def _load_model_file(path: Path) -> ModelConfig:
    if not path.is_file():
        raise UserError(f"file '{path}' not found", field="model")
    text = read_data_text(path)
    if path.suffix != ".json":
        raw = parse_yaml_text(text, str(path))
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(str(path), f"cannot parse ({exc.__class__.__name__})") from None
        except RecursionError:
            raise DataError(str(path), "cannot parse: nested too deeply") from None
    if not isinstance(raw, dict):
        raise DataError(str(path), "expected a mapping with layers, hidden, heads, vocab, seq_len")
    return _entry_to_config(_validate(raw, str(path), raw.get("id") or path.stem), path.stem)
