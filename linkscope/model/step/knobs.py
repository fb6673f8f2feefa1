"""Data-parallel communication knobs: gradient compression, DDP's bucket size and ZeRO++ (data/knobs.yaml).

This module owns what each knob is (bits on the wire, passes over the buffers, extra buffers, the frameworks and
ZeRO stages that run it), parses and checks the options, and gives the step model (model/step/train.py) the
factors it applies: the bytes a gradient reduction or ZeRO-3 gather moves, the collectives it issues, the memory
the knob adds. Compression changes the optimisation (what is summed is no longer the exact gradient); linkscope
has no convergence model and says so next to every compressed prediction (`optimisation_note`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import parse_yaml
from linkscope.model.step.transformer import ModelConfig

KNOBS_FILE = Path(__file__).parents[1] / "data" / "knobs.yaml"
COMPRESSIONS = ("none", "fp16", "bf16", "powersgd", "onebit")
ZEROPP = ("qw", "qg", "hp")
MIB = 2**20


class CompressionFacts(BaseModel):
    """One gradient compression (data/knobs.yaml `compressions`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    wire_bits: float | None = Field(default=None, gt=0, le=32)
    """Bits per gradient value on the wire; None: none (uncompressed) or from the matrix shapes (PowerSGD)."""
    hbm_passes: float = Field(ge=0)
    """Read-and-write passes over the gradient buffer to encode, decode and keep the error."""
    gradient_copies: float = Field(ge=0)
    """Extra gradient-sized buffers per GPU (error feedback)."""
    collectives_per_bucket: int = Field(ge=1)
    frameworks: tuple[str, ...]
    zero_stages: tuple[int, ...]
    optimisation: str
    source: str


class ZeroppFacts(BaseModel):
    """One ZeRO++ option (data/knobs.yaml `zeropp`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    wire_bits: float | None = Field(default=None, gt=0, le=32)
    hbm_passes: float = Field(ge=0)
    source: str


class KnobFacts(BaseModel):
    """data/knobs.yaml, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: str
    as_of: date
    default_bucket_mb: float = Field(gt=0)
    compressions: dict[str, CompressionFacts]
    zeropp: dict[str, ZeroppFacts]


@functools.cache
def knob_facts() -> KnobFacts:
    """The packaged knob facts, validated once."""
    try:
        facts = KnobFacts.model_validate(parse_yaml(KNOBS_FILE.read_text(encoding="utf-8")))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(KNOBS_FILE), err["msg"], field=".".join(map(str, err["loc"]))) from None
    if set(facts.compressions) != set(COMPRESSIONS):
        raise DataError(str(KNOBS_FILE), f"needs exactly {', '.join(COMPRESSIONS)}", field="compressions")
    if set(facts.zeropp) != set(ZEROPP):
        raise DataError(str(KNOBS_FILE), f"needs exactly {', '.join(ZEROPP)}", field="zeropp")
    return facts


@dataclass(frozen=True)
class Knobs:
    """The data-parallel knobs of a job; the default changes nothing in the step model."""

    compression: str = "none"
    powersgd_rank: int = 0
    """PowerSGD's matrix approximation rank (with `powersgd`)."""
    bucket_mb: float | None = None
    """DDP's bucket_cap_mb (MiB of gradients per bucket); None: the step model's own bucket (compute.yaml)."""
    zeropp: frozenset[str] = field(default_factory=frozenset)
    """ZeRO++ options in force: `qw` (INT8 weight gathers), `qg` (INT4 gradient reduce-scatter), `hp` (secondary
    weight partition inside the node)."""

    @property
    def active(self) -> bool:
        """Whether any knob departs from the default."""
        return self.compression != "none" or self.bucket_mb is not None or bool(self.zeropp)

    @property
    def compression_label(self) -> str:
        """`none`, `fp16`, `powersgd:4`, ... as the option is written."""
        return f"powersgd:{self.powersgd_rank}" if self.compression == "powersgd" else self.compression

    def label(self) -> str:
        """One short line naming every knob in force (`baseline` when none is)."""
        parts = [] if self.compression == "none" else [self.compression_label]
        if self.bucket_mb is not None:
            parts.append(f"bucket {self.bucket_mb:g} MB")
        if self.zeropp:
            parts.append("zero++ " + ",".join(o for o in ZEROPP if o in self.zeropp))
        return " + ".join(parts) or "baseline"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return {"grad_compression": self.compression_label, "bucket_mb": self.bucket_mb,
                "zeropp": [o for o in ZEROPP if o in self.zeropp]}


def parse_compression(text: str) -> tuple[str, int]:
    """`--grad-compression`: (name, PowerSGD rank) from none, fp16, bf16, onebit or powersgd:RANK."""
    name, _, rank_text = text.partition(":")
    if name not in COMPRESSIONS:
        shown = text if text.isprintable() else text.encode("unicode_escape").decode("ascii")
        raise UserError(f"'{shown}' is not one of none, fp16, bf16, powersgd:RANK, onebit", field="grad_compression")
    if name != "powersgd":
        if rank_text:
            raise UserError(f"only powersgd takes a rank (got '{text}')", field="grad_compression")
        return name, 0
    try:
        rank = int(rank_text or "1")
    except ValueError:
        raise UserError(f"PowerSGD rank must be an integer (got '{rank_text}')", field="grad_compression") from None
    if rank <= 0:
        raise UserError(f"PowerSGD rank must be at least 1 (got {rank})", field="grad_compression")
    return name, rank


def parse_zeropp(text: str | None) -> frozenset[str]:
    """`--zeropp qw,qg,hp` (any of them, comma-separated)."""
    if not text:
        return frozenset()
    options = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in options if o not in ZEROPP]
    if bad or not options:
        raise UserError(f"'{text}' must be a comma-separated list of {', '.join(ZEROPP)}", field="zeropp")
    return frozenset(options)


def knobs_from_options(grad_compression: str = "none", bucket_mb: float | None = None,
                       zeropp: str | None = None) -> Knobs:
    """The knobs the command line names, parsed (checked against a model with `check_knobs`)."""
    name, rank = parse_compression(grad_compression)
    if bucket_mb is not None and not (math.isfinite(bucket_mb) and bucket_mb > 0):
        raise UserError(f"must be above 0 (got {bucket_mb:g})", field="bucket_mb")
    return Knobs(compression=name, powersgd_rank=rank, bucket_mb=bucket_mb, zeropp=parse_zeropp(zeropp))


def matrix_shapes(model: ModelConfig) -> list[tuple[int, int]]:
    """(rows, columns) of one layer's weight matrices: QKV, output projection and the MLP's (for an MoE model its
    dense MLP; routed experts are matrices of the same kind, priced at the dense MLP's shapes)."""
    m = model
    mlp = [(m.hidden, m.ffn_hidden)] * (m.ffn_matrices - 1) + [(m.ffn_hidden, m.hidden)]
    return [(m.hidden, m.q_dim + 2 * m.kv_dim), (m.q_dim, m.hidden), *mlp]


def max_powersgd_rank(model: ModelConfig) -> int:
    """The largest rank PowerSGD can take on every matrix of the model: its smallest matrix dimension."""
    return min(min(shape) for shape in matrix_shapes(model))


def model_gradient_mb(model: ModelConfig, grad_bytes: float = 4.0) -> float:
    """The whole model's gradients in MiB (the largest bucket that means anything)."""
    return model.total_params() * grad_bytes / MIB


def check_knobs(knobs: Knobs, model: ModelConfig, framework: str, zero: int | None,
                grad_bytes: float = 4.0) -> None:
    """One line (UserError) for a knob the job cannot run: a compression its framework or ZeRO stage lacks,
    a PowerSGD rank above the matrices' size, a bucket above the model's gradients, ZeRO++ outside ZeRO-3."""
    facts = knob_facts().compressions[knobs.compression]
    name = knobs.compression_label
    if framework != "auto" and framework not in facts.frameworks:
        raise UserError(f"{name} does not run under {framework} (it runs under "
                        f"{', '.join(facts.frameworks)})", field="grad_compression")
    if zero is not None and zero not in facts.zero_stages:
        raise UserError(f"{name} does not run with ZeRO stage {zero} (it runs with stage "
                        f"{', '.join(map(str, facts.zero_stages))})", field="grad_compression")
    if knobs.compression == "powersgd" and knobs.powersgd_rank > max_powersgd_rank(model):
        raise UserError(f"PowerSGD rank {knobs.powersgd_rank} is above the smallest matrix "
                        f"dimension {max_powersgd_rank(model)} of {model.id}", field="grad_compression")
    if knobs.bucket_mb is not None and knobs.bucket_mb > model_gradient_mb(model, grad_bytes):
        raise UserError(f"{knobs.bucket_mb:g} is above the {model_gradient_mb(model, grad_bytes):.0f} "
                        f"MB of gradients of {model.id}", field="bucket_mb")
    if knobs.zeropp:
        if zero is not None and zero != 3:
            raise UserError(f"ZeRO++ runs with ZeRO stage 3 only (got ZeRO stage {zero})", field="zeropp")
        if framework not in ("auto", "deepspeed"):
            raise UserError(f"ZeRO++ is DeepSpeed's; it does not run under {framework}", field="zeropp")
        if knobs.compression != "none":
            raise UserError("ZeRO++ quantizes its own collectives; it cannot be combined with "
                            "gradient compression", field="zeropp")


def constrained_zero(knobs: Knobs, zero: int | None) -> int | None:
    """The ZeRO stage the layout search may use: the one given, else the only stage the knobs run with (0 for
    PowerSGD and 1-bit Adam, 3 for ZeRO++), else searched."""
    if zero is not None:
        return zero
    if knobs.zeropp:
        return 3
    stages = knob_facts().compressions[knobs.compression].zero_stages
    return stages[0] if len(stages) == 1 else None


def knob_framework(knobs: Knobs, framework: str) -> str:
    """The framework the knobs imply when none is given: DeepSpeed for 1-bit Adam and ZeRO++."""
    if framework == "auto" and (knobs.zeropp or knobs.compression == "onebit"):
        return "deepspeed"
    return framework


def powersgd_ratio(model: ModelConfig, rank: int, tp: np.ndarray) -> np.ndarray:
    """Wire bytes over uncompressed bytes of a PowerSGD reduction, per layout: each matrix (columns split by tp)
    sends r x (rows + columns) values where that is at most half of rows x columns (PyTorch's hook compresses a
    matrix only when it saves at least 2x, min_compression_rate = 2), the rest of the layer (norms, biases) whole."""
    tp = np.asarray(tp, dtype=float)
    layer = model.layer_params() / tp
    sent = np.zeros(np.shape(tp))
    whole = np.zeros(np.shape(tp))
    for rows, cols in matrix_shapes(model):
        n, m = rows, cols / tp
        low_rank = rank * (n + m)
        compress = 2 * low_rank <= n * m
        sent = sent + np.where(compress, low_rank, n * m)
        whole = whole + n * m
    rest = np.maximum(layer - whole, 0.0)
    return (sent + rest) / np.maximum(whole + rest, 1.0)


def grad_wire_factor(knobs: Knobs, model: ModelConfig, tp: np.ndarray, grad_bytes: float) -> np.ndarray:
    """Bytes a compressed gradient reduction moves over the uncompressed gradients' bytes, per layout."""
    tp = np.asarray(tp, dtype=float)
    if knobs.compression == "powersgd":
        return powersgd_ratio(model, knobs.powersgd_rank, tp)
    bits = knob_facts().compressions[knobs.compression].wire_bits
    factor = 1.0 if bits is None else min(1.0, bits / 8 / grad_bytes)
    return np.full(np.shape(tp), factor)


def zeropp_factor(knobs: Knobs, option: str, value_bytes: float) -> float:
    """Wire bytes over unquantised bytes of ZeRO++'s `option` (`qw` on weights, `qg` on gradients), 1 when off."""
    bits = knob_facts().zeropp[option].wire_bits
    if option not in knobs.zeropp or bits is None:
        return 1.0
    return min(1.0, bits / 8 / value_bytes)


def optimisation_note(knobs: Knobs) -> str:
    """What the knobs change in the optimisation, stated: linkscope predicts time, not convergence."""
    notes = [knob_facts().compressions[knobs.compression].optimisation] if knobs.compression != "none" else []
    if "qw" in knobs.zeropp or "qg" in knobs.zeropp:
        notes.append("ZeRO++ quantizes weights/gradients in flight (block-wise, with scales): no convergence model")
    return "; ".join(n for n in notes if n)
