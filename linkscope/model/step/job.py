"""The training job: what is trained, on how many sequences of what length, in which number format.

Its own module so that the step model, memory accounting and search all take it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.model.step.transformer import ModelConfig


@dataclass(frozen=True)
class Job:
    """What is trained: the model, the global batch (sequences), the sequence length and the number format."""

    model: ModelConfig
    global_batch: int
    seq_len: int
    precision: str = "bf16"
    attention: str = "flash"
    """`flash` (fused, causal half computed) or `unfused` (scores materialised, Megatron-LM 2022)."""
    dp_overlap: bool = True
    """Overlap the data-parallel gradient reduction with the last backward pass (Megatron --overlap-grad-reduce)."""
    tp_overlap: bool = False
    """Overlap tensor-parallel collectives with the GEMMs they feed (Megatron/NeMo --tp-comm-overlap)."""
    moe_dispatcher: str = "alltoall"
    """How MoE layers move tokens: `alltoall` (NCCL all-to-allv, Megatron's alltoall dispatcher) or `deepep`
    (DeepEP's hierarchical kernels, Megatron's flex dispatcher)."""
    moe_a2a_overlap: bool = False
    """Hide MoE dispatch and combine behind another micro-batch's compute (Megatron-Core's 1F1B A2A overlap,
    --overlap-moe-expert-parallel-comm): only what outlasts a layer's forward plus backward compute shows."""
    moe_imbalance: float = 1.0
    """Tokens the busiest expert-parallel rank receives over the mean: 1 under forced balance (how benchmarks run),
    above 1 for dropless routing, where every layer waits for its busiest rank's all-to-all and experts."""
