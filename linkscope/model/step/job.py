"""The training job: what is trained, on how many sequences of what length, in which number format.

Its own module so that the step model, memory accounting and search all take it without importing each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from linkscope.model.step.peft import Peft
from linkscope.model.step.transformer import ModelConfig


@dataclass(frozen=True)
class Job:
    """What is trained: the model, the global batch (sequences), the sequence length and the number format."""

    model: ModelConfig
    global_batch: int
    seq_len: int
    precision: str = "bf16"
    attention: str = "flash"
    """One of ATTENTION_KERNELS: `flash` (a fused kernel tuned for the GPU's generation, causal half computed),
    `flash2` (FlashAttention-2, tuned for Ampere: slower on Hopper), `triton` (FlashAttention's Triton kernel,
    slower still) or `unfused` (scores materialised, Megatron-LM 2022)."""
    dp_overlap: bool | None = None
    """Overlap the data-parallel gradient reduction with the backward pass (Megatron --overlap-grad-reduce,
    DeepSpeed overlap_comm); None: the framework's default (FRAMEWORK_DP_OVERLAP)."""
    tp_overlap: bool = False
    """Overlap tensor-parallel collectives with the GEMMs they feed (Megatron/NeMo --tp-comm-overlap)."""
    moe_dispatcher: str = "alltoall"
    """How MoE layers move tokens: `alltoall` (NCCL all-to-allv, Megatron's alltoall dispatcher) or `deepep`
    (DeepEP's hierarchical kernels, Megatron's flex dispatcher)."""
    moe_transport: str = "auto"
    """How the dispatcher's kernels reach other GPUs (model/comm/moe.py TRANSPORT_CHOICES): ibgda, proxy, efa,
    nvlink, or auto (from the System)."""
    moe_a2a_overlap: bool = False
    """Hide MoE dispatch and combine behind another micro-batch's compute (Megatron-Core's 1F1B A2A overlap,
    --overlap-moe-expert-parallel-comm): only what outlasts a layer's forward plus backward compute shows."""
    moe_imbalance: float = 1.0
    """Tokens the busiest expert-parallel rank receives over the mean: 1 under forced balance (how benchmarks run),
    above 1 for dropless routing, where every layer waits for its busiest rank's all-to-all and experts."""
    peft: Peft | None = None
    """A LoRA fine-tune of a frozen base (None: every weight trains)."""
    framework: str = "auto"
    """One of FRAMEWORKS: how data-parallel communication is scheduled; `auto` follows the ZeRO stage."""
    grad_precision: str = "fp32"
    """Format the data-parallel gradients accumulate and reduce in: `fp32` (Megatron's default for BF16 training,
    `grad_reduce_in_fp32`; FSDP's `reduce_dtype`) or `bf16` (the parameters' format: Megatron-Bridge's recipes
    with `grad_reduce_in_fp32 = False`), halving the gradient buffers and the bytes they reduce."""
    fp8_activation_store: bool = False
    """Keep the MLP activation function's input (the first MLP GEMM's output) in FP8 for backward, one byte a
    value instead of two (Megatron-Core's `activation_func_fp8_input_store`, MLPerf's FP8_ACT)."""
    recompute_layers: int | None = None
    """Under full recomputation, how many layers of each pipeline stage recompute (Megatron/NeMo
    `--recompute-method block --recompute-num-layers N`: the first N); the rest keep their activations.
    None: every layer recomputes."""


DEFAULT_BATCH_TOKENS = 4 * 2**20
"""Default global batch in tokens (~4M), the size most published pre-training runs settle on."""


def default_global_batch(seq_len: int) -> int:
    """~4M tokens per step, in sequences, rounded to a power of two (1024 sequences at 4096 tokens)."""
    sequences = max(DEFAULT_BATCH_TOKENS / seq_len, 1.0)
    return 2 ** round(math.log2(sequences))


def batch_and_length(default_seq_len: int, global_batch: int | None, seq_len: int | None) -> tuple[int, int]:
    """(global batch, sequence length) of a job: as given, else the model's length and ~4M tokens per step."""
    length = seq_len if seq_len is not None else default_seq_len
    return (global_batch if global_batch is not None else default_global_batch(max(length, 1))), length


ATTENTION_KERNELS = ("flash", "flash2", "triton", "unfused")
"""Attention implementations a job may run: `flash`, `flash2` and `triton` are fused (the score matrix never
reaches HBM and the masked half of a causal matrix is skipped); `unfused` materialises the scores."""


def fused_attention(job: Job) -> bool:
    """Whether the job's attention kernel is fused (no score matrix in HBM, causal half skipped)."""
    return job.attention != "unfused"


def recomputed_layers(job: Job, layers: np.ndarray) -> np.ndarray:
    """Layers of a stage of `layers` layers that full recomputation redoes: all, or the job's block of them."""
    return layers if job.recompute_layers is None else np.minimum(layers, float(job.recompute_layers))


FRAMEWORKS = ("auto", "megatron", "fsdp", "deepspeed")
FRAMEWORK_ZERO_STAGES = {"megatron": (0, 1, 3), "fsdp": (0, 2, 3), "deepspeed": (0, 1, 2, 3)}
"""The ZeRO stages each framework runs. Megatron-LM: DDP (0), the distributed optimizer (1: it keeps full-size
gradient buffers and reduce-scatters them once per step), Megatron-FSDP (3). PyTorch FSDP: NO_SHARD (0),
SHARD_GRAD_OP (2), FULL_SHARD (3). DeepSpeed: stages 0-3."""
FRAMEWORK_DP_OVERLAP = {"megatron": True, "fsdp": True, "deepspeed": False}
"""Whether the framework overlaps gradient reduction with backward unless told otherwise: Megatron-style
recipes (NeMo, Megatron-Bridge) turn --overlap-grad-reduce on, FSDP always issues its reduce-scatters during
backward, DeepSpeed's `overlap_comm` defaults to false (true only for stage 3, where the per-layer schedule
of the step model applies)."""


def framework_for(framework: str, zero: int, pp: int = 1) -> str:
    """The framework a layout of ZeRO stage `zero` and `pp` pipeline stages runs under: the one given, or under
    `auto` the usual one for the stage (Megatron-style for 0 and 1, DeepSpeed for 2, which Megatron does not
    have, FSDP for 3). DeepSpeed's pipeline engine runs ZeRO stages 0 and 1 only, so a pipelined ZeRO-2 layout
    is FSDP's (gradients sharded beside pipeline stages, as torchtitan composes them)."""
    if framework != "auto":
        return framework
    if zero == 2 and pp > 1:
        return "fsdp"
    return {2: "deepspeed", 3: "fsdp"}.get(zero, "megatron")


def per_framework(job: Job, zero: np.ndarray, pp: np.ndarray | int, value: Callable[[str], object]) -> np.ndarray:
    """Per layout, `value` of the framework it runs under (`framework_for` its ZeRO stage and pipeline depth)."""
    table = np.asarray([[value(framework_for(job.framework, stage, pipelined)) for pipelined in (1, 2)]
                        for stage in range(4)])
    return table[np.asarray(zero, dtype=int), (np.asarray(pp) > 1).astype(int)]
