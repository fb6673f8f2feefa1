"""Memory per GPU for training: weights, gradients, optimizer states, activations (Korthikanti et al. 2022).

Activation bytes per token and layer generalise Korthikanti's `34 h + 5 a s` to grouped-query attention
and gated MLPs: 10 h bytes that tensor parallelism alone does not split (layer-norm inputs, the attention
and MLP inputs, two dropout masks) plus Q, K, V, the projection input and the MLP intermediates, which it
does; sequence parallelism splits everything. Unfused attention adds 5 a s bytes (scores, softmax, mask).
"""

from __future__ import annotations

import numpy as np

from linkscope.hardware.system import System
from linkscope.model.step.compute import compute_constants
from linkscope.model.step.job import Job
from linkscope.model.step.layout import Layouts
from linkscope.model.step import peft as lora

GIB = float(1 << 30)


def stage_params(job: Job, lay: Layouts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights one GPU of the busiest stage holds, as (non-expert, routed expert, expert data-parallel ranks):
    non-expert weights split by tp, routed experts by ep x etp, each expert replicated over the
    tp x cp x dp / (ep x etp) ranks of the fold."""
    m = job.model
    layers = np.ceil(m.layers / lay.pp)
    expert = layers * m.expert_params_per_layer()
    dense = (layers * m.layer_params() - expert + m.embedding_params()) / lay.tp
    edp = np.maximum(lay.tp * lay.cp * lay.dp // (lay.ep * lay.etp), 1)
    return dense, expert / (lay.ep * lay.etp), edp


def trainable_groups(job: Job, lay: Layouts) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """What one GPU of the busiest stage trains, as (parameters, data-parallel ranks, their stride) per group:
    under LoRA its stage's adapters across dp; else non-expert weights across dp and routed experts across their
    expert data-parallel ranks, ep x etp apart."""
    stride = lay.tp * lay.cp
    if job.peft is not None:
        m = job.model
        return [(lora.stage_trainable_params(m, job.peft, np.ceil(m.layers / lay.pp)) / lay.tp, lay.dp, stride)]
    dense, expert, edp = stage_params(job, lay)
    return [(dense, lay.dp, stride), (expert, edp, lay.ep * lay.etp)]


def activation_bytes_per_token(job: Job, lay: Layouts) -> np.ndarray:
    """Stored activations of one layer for one token on one GPU."""
    m = job.model
    ffn_terms = (6 if m.gated_mlp else 4) * m.mean_ffn_width()
    split = 2 * m.hidden + 4 * m.kv_dim + 2 * m.hidden + ffn_terms
    replicated = 10 * m.hidden
    per_token = np.where(lay.sp, (replicated + split) / lay.tp, replicated + split / lay.tp)
    scores = 5.0 * m.heads * job.seq_len / lay.tp if job.attention == "unfused" else 0.0
    if job.peft is not None:
        per_token = per_token + lora.adapter_activation_bytes_per_token(m, job.peft)
    selective_or_full = lay.recompute >= 1
    return per_token + np.where(selective_or_full, 0.0, scores)


def _in_flight_layers_bytes(job: Job, lay: Layouts, per_token: np.ndarray) -> np.ndarray:
    m = job.model
    tokens = lay.mb * job.seq_len / lay.cp
    layers = np.ceil(m.layers / lay.pp)
    microbatches = job.global_batch / (lay.dp * lay.mb)
    # 1F1B keeps p micro-batches in flight on the first stage; interleaving adds (p-1)/(p v) of that.
    interleave = np.where(lay.v > 1, 1 + (lay.pp - 1) / (lay.pp * lay.v), 1.0)
    in_flight = np.minimum(lay.pp, microbatches) * interleave
    full = lay.recompute == 2
    checkpoint = 2.0 * m.hidden / np.where(lay.sp, lay.tp, 1)
    stored = np.where(full, checkpoint, per_token) * tokens * layers * in_flight
    # Full recomputation still materialises one layer's activations while it runs backward.
    working = np.where(full, per_token * tokens, 0.0)
    return stored + working


def _logits_bytes(job: Job, lay: Layouts) -> np.ndarray:
    tokens = lay.mb * job.seq_len / lay.cp
    return tokens * job.model.vocab / lay.tp * 4.0


def _state_bytes(job: Job, lay: Layouts) -> np.ndarray:
    c = compute_constants()
    if job.peft is not None:
        return _peft_state_bytes(job, job.peft, lay)
    dense, expert, edp = stage_params(job, lay)

    def sharded(per_param: float, stage: int) -> np.ndarray:
        # ZeRO shards non-expert state over dp and expert state over the expert data-parallel ranks.
        return (dense / np.where(lay.zero >= stage, lay.dp, 1) + expert / np.where(lay.zero >= stage, edp, 1)) \
            * per_param
    weights = sharded(c.weight_bytes, 3)
    grads = sharded(c.grad_bytes, 2)
    optimizer = sharded(c.optimizer_bytes, 1)
    return weights + grads + optimizer + _zero3_working_bytes(job, lay)


def _peft_state_bytes(job: Job, peft: lora.Peft, lay: Layouts) -> np.ndarray:
    """The frozen base holds weights only, in its stored format; the adapters carry the full training state.
    (LoRA is refused on MoE models, so the base is dense.)"""
    m, c = job.model, compute_constants()
    params = (np.ceil(m.layers / lay.pp) * m.layer_params() + m.embedding_params()) / lay.tp
    base = params * lora.base_bytes_per_param(peft) / np.where(lay.zero >= 3, lay.dp, 1)
    adapters = lora.stage_trainable_params(m, peft, np.ceil(m.layers / lay.pp)) / lay.tp
    weights = adapters * c.weight_bytes / np.where(lay.zero >= 3, lay.dp, 1)
    grads = adapters * c.grad_bytes / np.where(lay.zero >= 2, lay.dp, 1)
    optimizer = adapters * c.optimizer_bytes / np.where(lay.zero >= 1, lay.dp, 1)
    return base + weights + grads + optimizer + _zero3_working_bytes(job, lay)


ZERO3_LAYERS_GATHERED = 2
"""Layers whose full weights ZeRO-3/FSDP holds at once: the one computing and the one prefetched (FSDP's
`limit_all_gathers` and FSDP2's default prefetch keep one gather ahead)."""


def _zero3_working_bytes(job: Job, lay: Layouts) -> np.ndarray:
    """What ZeRO-3 materialises beyond its shards: the gathered weights of the layers in flight and one layer's
    full gradients before their reduce-scatter."""
    c, m = compute_constants(), job.model
    # A GPU gathers only its own routed experts (their shards live on the expert data-parallel ranks).
    layer = (m.layer_params() - m.expert_params_per_layer()) / lay.tp + m.expert_params_per_layer() / (lay.ep * lay.etp)
    working = layer * (ZERO3_LAYERS_GATHERED * c.weight_bytes + c.grad_bytes)
    if job.peft is not None:
        adapters = lora.adapter_params_per_layer(job.model, job.peft) / lay.tp
        working = layer * ZERO3_LAYERS_GATHERED * lora.base_bytes_per_param(job.peft) + adapters * c.grad_bytes
    return np.where((lay.zero >= 3) & (lay.dp > 1), working, 0.0)


def memory_gib_per_gpu(job: Job, system: System | None, lay: Layouts) -> np.ndarray:
    """Peak memory of the busiest GPU (first or last pipeline stage), GiB. The System is not consulted: memory
    depends on the job and the layout only."""
    per_token = activation_bytes_per_token(job, lay)
    total = _state_bytes(job, lay) + _in_flight_layers_bytes(job, lay, per_token) + _logits_bytes(job, lay)
    return total / GIB
