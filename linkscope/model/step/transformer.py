"""Transformer shapes (presets or a user's YAML/JSON file) and their parameter and FLOP counts.

FLOPs follow Korthikanti et al. 2022 / Narayanan et al. 2021: per token and layer, forward matmuls cost
2 x (weights touched) plus 4 s h for attention scores and values (the full s x s matrix, as Megatron's MFU
convention counts it); backward costs twice the forward. Gated MLPs (SwiGLU) have three FFN matrices.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import parse_yaml, parse_yaml_text, read_data_text

PRESETS_FILE = Path(__file__).parents[1] / "data" / "models.yaml"


MAX_LAYERS = 100_000
MAX_WIDTH = 10_000_000
MAX_VOCAB = 100_000_000
MAX_SEQ_LEN = 100_000_000


class ModelEntry(BaseModel):
    """A model file's fields, validated at the edge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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
    source: str = ""
    as_of: Any = None

    @model_validator(mode="after")
    def _shapes_agree(self) -> ModelEntry:
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        return self


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer."""

    id: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    seq_len: int
    gated_mlp: bool

    @property
    def head_dim(self) -> int:
        """Hidden size per attention head."""
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices in the MLP: 3 for gated (SwiGLU), 2 otherwise."""
        return 3 if self.gated_mlp else 2

    def layer_params(self) -> int:
        """Weights of one transformer layer (attention + MLP + two norms, biases ignored)."""
        attn = self.hidden * (self.hidden + 2 * self.kv_dim) + self.hidden * self.hidden
        mlp = self.ffn_matrices * self.hidden * self.ffn_hidden
        return attn + mlp + 4 * self.hidden

    def embedding_params(self) -> int:
        """Input embedding; the output projection is a second matrix of the same size."""
        return self.vocab * self.hidden

    def total_params(self) -> int:
        """All weights, with untied input and output embeddings."""
        return self.layers * self.layer_params() + 2 * self.embedding_params()

    def layer_matmul_flops_per_token(self) -> int:
        """Forward matmul FLOPs of one layer for one token, excluding attention scores/values."""
        return 2 * (self.layer_params() - 4 * self.hidden)

    def attention_flops_per_token(self, seq_len: int) -> int:
        """Forward FLOPs of QK^T and (scores)V for one token over the full sequence."""
        return 4 * seq_len * self.hidden

    def model_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward + backward, no recomputation): the MFU numerator."""
        per_layer = self.layer_matmul_flops_per_token() + self.attention_flops_per_token(seq_len)
        logits = 2 * self.hidden * self.vocab
        return 3.0 * (self.layers * per_layer + logits)


def _entry_to_config(entry: ModelEntry, default_id: str) -> ModelConfig:
    return ModelConfig(id=entry.id or default_id, layers=entry.layers, hidden=entry.hidden, heads=entry.heads,
                       kv_heads=entry.kv_heads or entry.heads, ffn_hidden=entry.ffn_hidden or 4 * entry.hidden,
                       vocab=entry.vocab, seq_len=entry.seq_len, gated_mlp=entry.gated_mlp)


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
    """The packaged model presets by id and alias."""
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
    seq_len, gated_mlp."""
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
