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
from linkscope.model.step.job import Job, fused_attention, recomputed_layers
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


def weight_replicas(lay: Layouts) -> np.ndarray:
    """Ranks that hold the same non-expert weights: the data-parallel ranks times the context-parallel ones.
    Context-parallel ranks compute gradients of the same weights on other parts of the sequence, so gradients
    are reduced, and ZeRO shards its state, over dp x cp (Megatron-Core's data-parallel group with context
    parallelism; torchtitan's FSDP mesh `dp_shard_cp`)."""
    return lay.dp * lay.cp


def trainable_groups(job: Job, lay: Layouts) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """What one GPU of the busiest stage trains, as (parameters, data-parallel ranks, their stride) per group:
    under LoRA its stage's adapters across dp x cp; else non-expert weights across dp x cp (tp apart: cp ranks
    sit next to each other inside each dp replica) and routed experts across their expert data-parallel ranks,
    ep x etp apart."""
    if job.peft is not None:
        m = job.model
        return [(lora.stage_trainable_params(m, job.peft, np.ceil(m.layers / lay.pp)) / lay.tp, weight_replicas(lay),
                 lay.tp)]
    dense, expert, edp = stage_params(job, lay)
    return [(dense, weight_replicas(lay), lay.tp), (expert, edp, lay.ep * lay.etp)]


def activation_bytes_per_token(job: Job, lay: Layouts) -> np.ndarray:
    """Stored activations of one layer for one token on one GPU."""
    m = job.model
    ffn_terms = (6 if m.gated_mlp else 4) * m.mean_ffn_width()
    split = 2 * m.hidden + 4 * m.kv_dim + 2 * m.hidden + ffn_terms
    replicated = 10 * m.hidden
    if job.precision == "fp8" and job.peft is None:
        # FP8 linears keep the FP8 cast of their input for the weight-gradient GEMM, one byte a value, not the
        # BF16 input (Transformer Engine's Linear and LayerNormLinear save the quantized input): the QKV and
        # FC1 inputs (the norms' outputs) and FC2's input halve, while the attention output stays in BF16 for
        # the fused attention's backward and the projection keeps an FP8 copy beside it.
        replicated = replicated - 2 * m.hidden
        split = split + m.hidden - m.mean_ffn_width()
    per_token = np.where(lay.sp, (replicated + split) / lay.tp, replicated + split / lay.tp)
    scores = 5.0 * m.heads * job.seq_len / lay.tp if not fused_attention(job) else 0.0
    if job.peft is not None:
        per_token = per_token + lora.adapter_activation_bytes_per_token(m, job.peft)
    selective_or_full = lay.recompute >= 1
    return per_token + np.where(selective_or_full, 0.0, scores)


def _stage_layers(job: Job, lay: Layouts, stage: str) -> np.ndarray:
    """Layers pipeline stage `stage` (first, second or last) holds. Where the layers do not fill the stages
    evenly, the short stages are the first and the last (Megatron-Core's pipeline layout and its options to
    count the embedding and the loss as layers place them there: 126 layers on 16 stages run 7 + 14 x 8 + 7),
    since the first holds the most micro-batches and the last the output layer."""
    full = np.ceil(job.model.layers / lay.pp)
    short = full * lay.pp - job.model.layers
    if stage == "first":
        return full - np.where((lay.pp > 1) & (short >= 1), 1, 0)
    if stage == "last":
        return full - np.where((lay.pp > 1) & (short >= 2), 1, 0)
    return full


def _in_flight_layers_bytes(job: Job, lay: Layouts, per_token: np.ndarray, stage: str = "first") -> np.ndarray:
    """Activations pipeline stage `stage` (first, second or last) holds at its peak."""
    m = job.model
    tokens = lay.mb * job.seq_len / lay.cp
    layers = _stage_layers(job, lay, stage)
    microbatches = job.global_batch / (lay.dp * lay.mb)
    rank = {"first": 0, "second": 1}.get(stage)
    if rank is None:
        # The last stage runs each micro-batch's backward right after its forward: one in flight; interleaved,
        # Megatron's warm-up leaves (v-1) p + 1 chunks of layers / v in flight on it.
        in_flight = np.where(lay.v > 1, ((lay.v - 1) * lay.pp + 1) / lay.v, 1.0)
    else:
        # 1F1B keeps p - r micro-batches in flight on stage r; interleaved, Megatron's warm-up runs
        # 2 (p - r - 1) + (v - 1) p chunks of layers / v before the first backward (1 + (p-1)/(p v) times p on
        # the first stage).
        plain = np.minimum(np.maximum(lay.pp - rank, 1), microbatches)
        chunks = (2 * np.maximum(lay.pp - rank - 1, 0) + (lay.v - 1) * lay.pp + 1) / (lay.v * lay.pp)
        in_flight = np.where(lay.v > 1, np.minimum(lay.pp, microbatches) * chunks, plain)
    full = lay.recompute == 2
    checkpoint = 2.0 * m.hidden / np.where(lay.sp, lay.tp, 1)
    # Under block recomputation only the recomputed layers keep just their input checkpoint.
    redone = np.where(full, recomputed_layers(job, layers), 0.0)
    stored = (checkpoint * redone + per_token * (layers - redone)) * tokens * in_flight
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
        return (dense / np.where(lay.zero >= stage, weight_replicas(lay), 1)
                + expert / np.where(lay.zero >= stage, edp, 1)) * per_param
    weights = sharded(c.weight_bytes, 3)
    grads = sharded(c.grad_bytes, 2)
    optimizer = sharded(c.optimizer_bytes, 1)
    return weights + grads + optimizer + _zero3_working_bytes(job, lay)


def _peft_state_bytes(job: Job, peft: lora.Peft, lay: Layouts) -> np.ndarray:
    """The frozen base holds weights only, in its stored format; the adapters carry the full training state.
    (LoRA is refused on MoE models, so the base is dense.)"""
    m, c = job.model, compute_constants()
    params = (np.ceil(m.layers / lay.pp) * m.layer_params() + m.embedding_params()) / lay.tp
    replicas = weight_replicas(lay)
    base = params * lora.base_bytes_per_param(peft) / np.where(lay.zero >= 3, replicas, 1)
    adapters = lora.stage_trainable_params(m, peft, np.ceil(m.layers / lay.pp)) / lay.tp
    weights = adapters * c.weight_bytes / np.where(lay.zero >= 3, replicas, 1)
    grads = adapters * c.grad_bytes / np.where(lay.zero >= 2, replicas, 1)
    optimizer = adapters * c.optimizer_bytes / np.where(lay.zero >= 1, replicas, 1)
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
    return np.where((lay.zero >= 3) & (weight_replicas(lay) > 1), working, 0.0)


def _second_embedding_bytes(job: Job, lay: Layouts) -> np.ndarray:
    """State of the output layer where it shares a GPU with the input embedding (one pipeline stage): the two
    matrices are untied, and `stage_params` counts one per stage (the first stage holds the input embedding,
    the last the output layer)."""
    if job.peft is not None:
        return np.zeros(len(lay))
    c = compute_constants()
    per_param = c.weight_bytes / np.where(lay.zero >= 3, weight_replicas(lay), 1) \
        + c.grad_bytes / np.where(lay.zero >= 2, weight_replicas(lay), 1) \
        + c.optimizer_bytes / np.where(lay.zero >= 1, weight_replicas(lay), 1)
    return np.where(lay.pp == 1, job.model.embedding_params() / lay.tp * per_param, 0.0)


def memory_gib_per_gpu(job: Job, system: System | None, lay: Layouts) -> np.ndarray:
    """Peak memory of the busiest GPU, GiB: the first pipeline stages (input embedding, the most micro-batches in
    flight; the second where the first is short) or the last (output layer, logits, fewer in flight), all on one
    GPU without pipelining. The System
    is not consulted: memory depends on the job and the layout only."""
    per_token = activation_bytes_per_token(job, lay)
    state = _state_bytes(job, lay) + _second_embedding_bytes(job, lay)
    first = _in_flight_layers_bytes(job, lay, per_token)
    if np.any((lay.pp > 1) & (job.model.layers % lay.pp > 0)):
        # The second stage can only outweigh a first stage that is short.
        first = np.maximum(first, np.where(lay.pp > 1, _in_flight_layers_bytes(job, lay, per_token, "second"), 0.0))
    last = _in_flight_layers_bytes(job, lay, per_token, "last") + _logits_bytes(job, lay)
    activations = np.where(lay.pp == 1, first + _logits_bytes(job, lay), np.maximum(first, last))
    return (state + activations) / GIB
