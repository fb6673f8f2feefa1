"""The training job: what is trained, on how many sequences of what length, in which number format.

Its own module so that the step model, memory accounting and search all take it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """`flash` (fused, causal half computed) or `unfused` (scores materialised, Megatron-LM 2022)."""
    dp_overlap: bool = True
    """Overlap the data-parallel gradient reduction with the last backward pass (Megatron --overlap-grad-reduce)."""
    tp_overlap: bool = False
    """Overlap tensor-parallel collectives with the GEMMs they feed (Megatron/NeMo --tp-comm-overlap)."""
    peft: Peft | None = None
    """A LoRA fine-tune of a frozen base (None: every weight trains)."""
