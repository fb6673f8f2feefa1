"""Parameter-efficient fine-tuning (LoRA): the one owner of its arithmetic.

A LoRA adapter on a frozen weight W (d_in x d_out) adds B·A with A: d_in x r and B: r x d_out (Hu et al. 2021,
"LoRA: Low-Rank Adaptation of Large Language Models"). Only the adapters train: the base weights need no
gradients and no optimizer state, their backward computes activation gradients only (no weight-gradient GEMM),
and data parallelism reduces only the adapters' gradients. A quantized base (QLoRA, Dettmers et al. 2023) stores
W in 4-bit NormalFloat and dequantizes it to BF16 for every GEMM that reads it.

Everything here is per layer and per token so the step and memory models scale it by their own layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from linkscope.model.step.transformer import ModelConfig

N = TypeVar("N", float, np.ndarray)
"""A count that is one number or one per candidate layout."""

PEFT_METHODS = ("lora",)
TARGETS = ("attn", "attn-mlp", "all")
"""`attn`: Q, K, V and the output projection; `attn-mlp`: also the MLP's matrices; `all`: also the output layer."""
BASE_PRECISIONS = ("bf16", "fp8", "nf4")
DEFAULT_RANK = 16
DEFAULT_TARGETS = "attn"
"""r=16 on the attention projections: the MLPerf Training Llama-2-70B LoRA reference's settings."""

BASE_BYTES_PER_PARAM = {"bf16": 2.0, "fp8": 1.0, "nf4": 4.127 / 8}
"""Bytes a frozen base weight takes. NF4 with double quantization: 4 bits plus 0.127 bits of block constants per
parameter (Dettmers et al. 2023, QLoRA, Section 3)."""

DEQUANT_BYTES_PER_PARAM = 2.0
"""BF16 bytes a dequantized weight is written as before its GEMM reads it (QLoRA's compute dtype)."""

MAX_RANK_SHARE = 1.0
"""The rank may not exceed the hidden size: beyond it the adapter is no longer low-rank."""


@dataclass(frozen=True)
class Peft:
    """A LoRA fine-tune: adapter rank, which weights get adapters, and the frozen base's number format."""

    rank: int = DEFAULT_RANK
    targets: str = DEFAULT_TARGETS
    base_precision: str = "bf16"
    method: str = "lora"

    def as_dict(self) -> dict[str, object]:
        """JSON form (the `peft` object of `--json`)."""
        return {"method": self.method, "rank": self.rank, "targets": self.targets,
                "base_precision": self.base_precision}


def check_peft(peft: Peft, model: ModelConfig) -> str | None:
    """Why `peft` cannot apply to `model` (one line naming the option), or None."""
    if peft.method not in PEFT_METHODS:
        return f"--peft: '{peft.method}' is not one of {', '.join(PEFT_METHODS)}"
    if peft.targets not in TARGETS:
        return f"--lora-targets: '{peft.targets}' is not one of {', '.join(TARGETS)}"
    if peft.base_precision not in BASE_PRECISIONS:
        return f"--base-precision: '{peft.base_precision}' is not one of {', '.join(BASE_PRECISIONS)}"
    if model.is_moe:
        # Adapters on routed experts (and their gradients' expert-data-parallel reduction) are not modelled.
        return f"--peft: LoRA on an MoE model ({model.id}) is not modelled; fine-tune a dense model"
    if not 1 <= peft.rank <= model.hidden * MAX_RANK_SHARE:
        return f"--lora-rank: must be between 1 and the hidden size {model.hidden} of {model.id} (got {peft.rank})"
    return None


def adapted_shapes(model: ModelConfig, targets: str) -> list[tuple[int, int]]:
    """(d_in, d_out) of every weight of one transformer layer that carries an adapter."""
    m = model
    attn = [(m.hidden, m.hidden), (m.hidden, m.kv_dim), (m.hidden, m.kv_dim), (m.hidden, m.hidden)]
    mlp = [(m.hidden, m.ffn_hidden)] * (m.ffn_matrices - 1) + [(m.ffn_hidden, m.hidden)]
    return attn if targets == "attn" else attn + mlp


def adapter_params_per_layer(model: ModelConfig, peft: Peft) -> int:
    """Trainable parameters of one layer: r x (d_in + d_out) per adapted weight."""
    return sum(peft.rank * (d_in + d_out) for d_in, d_out in adapted_shapes(model, peft.targets))


def output_adapter_params(model: ModelConfig, peft: Peft) -> int:
    """Trainable parameters on the output layer (only with `all`)."""
    return peft.rank * (model.hidden + model.vocab) if peft.targets == "all" else 0


def trainable_params(model: ModelConfig, peft: Peft) -> int:
    """All adapter parameters of the model."""
    return model.layers * adapter_params_per_layer(model, peft) + output_adapter_params(model, peft)


def frozen_params(model: ModelConfig) -> int:
    """The base model's parameters, all frozen."""
    return model.total_params()


def adapter_flops_per_token(model: ModelConfig, peft: Peft) -> int:
    """Forward FLOPs of one layer's adapters for one token (x·A, then ·B). Backward costs twice that: the
    activation gradient through B and A and their weight gradients."""
    return 2 * adapter_params_per_layer(model, peft)


def adapter_activation_bytes_per_token(model: ModelConfig, peft: Peft) -> int:
    """Stored BF16 intermediates (x·A, r wide) of one layer's adapters for one token; their inputs are the
    base layer's, already counted."""
    return 2 * peft.rank * len(adapted_shapes(model, peft.targets))


def unsaved_input_bytes_per_token(model: ModelConfig, peft: Peft) -> tuple[float, float]:
    """Bytes per token and layer of the inputs of frozen linears that no adapter reads, which backward does not
    keep, as (the part tensor parallelism alone leaves whole, the part it splits).

    A frozen linear's backward computes only the gradient of its input, from the weight and the output gradient:
    its input is needed for a weight gradient only. Transformer Engine keeps it only then (`_Linear.forward` and
    `_LayerNormLinear.forward`: `backward_needs_input = is_grad_enabled and weight.requires_grad`). An adapted
    linear's input stays, read by the adapter's own weight gradient (NeMo's LoRA adapters take the layer-norm
    output that `linear_qkv` returns, and `linear_proj`'s input). With adapters on attention only, the MLP's two
    GEMMs keep nothing: FC1's input (the layer-norm output, 2 h bytes; the norm keeps its own input) and FC2's
    input (the activation function's output, 2 bytes a value of the FFN width). The activation function still
    keeps its input for its own backward."""
    if peft.targets != "attn":
        return 0.0, 0.0
    return 2.0 * model.hidden, 2.0 * model.mean_ffn_width()


def base_bytes_per_param(peft: Peft) -> float:
    """Bytes one frozen base weight takes in memory."""
    return BASE_BYTES_PER_PARAM[peft.base_precision]


def dequantizes(peft: Peft, gemm_precision: str) -> bool:
    """Whether each GEMM first expands the stored base weight to BF16: NF4 always, FP8 storage unless the
    GEMMs themselves run in FP8."""
    return peft.base_precision == "nf4" or (peft.base_precision == "fp8" and gemm_precision != "fp8")


def dequant_bytes_per_param(peft: Peft) -> float:
    """HBM traffic to dequantize one base weight: read it stored, write it as BF16."""
    return base_bytes_per_param(peft) + DEQUANT_BYTES_PER_PARAM


def model_flops_per_token(model: ModelConfig, peft: Peft, seq_len: int) -> float:
    """Fine-tuning FLOPs per token without recomputation: the base forward, its backward for activation
    gradients only (one forward's worth, the weight-gradient GEMMs skipped), attention backward in full, and
    the adapters' forward and backward."""
    matmul = model.layer_matmul_flops_per_token()
    attn = model.attention_flops_per_token(seq_len)
    logits = 2 * model.hidden * model.vocab
    adapters = model.layers * adapter_flops_per_token(model, peft) + 2 * output_adapter_params(model, peft)
    return model.layers * (2 * matmul + 3 * attn) + 2 * logits + 3 * adapters


def data_parallel_only(peft: Peft | None) -> bool:
    """An NF4 base runs under data parallelism (DDP, FSDP, ZeRO) only: bitsandbytes' 4-bit layers have no
    tensor- or pipeline-parallel form in Megatron-style frameworks."""
    return peft is not None and peft.base_precision == "nf4"


def check_peft_layout(peft: Peft | None, tp: int | None, pp: int | None) -> str | None:
    """Why a layout cannot run `peft` (one line naming the option), or None."""
    if data_parallel_only(peft) and ((tp or 1) > 1 or (pp or 1) > 1):
        return ("--base-precision nf4: a 4-bit base runs under data parallelism (DDP/FSDP/ZeRO) only; "
                "use --tp 1 --pp 1 or a bf16/fp8 base")
    return None


def check_peft_gpu(peft: Peft | None, gpu_id: str, has_fp8: bool) -> str | None:
    """Why `gpu_id` cannot hold `peft`'s base, or None."""
    if peft is not None and peft.base_precision == "fp8" and not has_fp8:
        return f"--base-precision fp8: {gpu_id} has no FP8 support; use bf16 or nf4"
    return None


def stage_trainable_params(model: ModelConfig, peft: Peft, layers: N) -> N:
    """Adapter parameters of a pipeline stage of `layers` layers (the last stage's output-layer adapter with
    them, as the step model charges the busiest stage), before tensor-parallel splitting."""
    return layers * adapter_params_per_layer(model, peft) + output_adapter_params(model, peft)


def training_flops_per_token(model: ModelConfig, peft: Peft | None, seq_len: int) -> float:
    """The MFU numerator per token: full training's (ModelConfig.model_flops_per_token), or the fine-tune's."""
    return model.model_flops_per_token(seq_len) if peft is None else model_flops_per_token(model, peft, seq_len)
