"""Memory per GPU for training: weights, gradients, optimizer states, activations (Korthikanti et al. 2022).

Activation bytes per token and layer generalise Korthikanti's `34 h + 5 a s` to grouped-query attention
and gated MLPs: 10 h bytes that tensor parallelism alone does not split (layer-norm inputs, the attention
and MLP inputs, two dropout masks; 8 h for a model trained without dropout) plus Q, K, V, the projection
input and the MLP intermediates, which it does; sequence parallelism splits everything. Unfused attention
adds 5 a s bytes (scores, softmax, mask; 4 a s without dropout).
"""

from __future__ import annotations

import numpy as np

from linkscope.hardware.system import System
from linkscope.model.step.compute import compute_constants
from linkscope.model.step.job import Job, fused_attention, per_framework, recomputed_layers
from linkscope.model.step.layout import Layouts
from linkscope.model.step import peft as lora

GIB = float(1 << 30)


def gradient_bytes(job: Job) -> float:
    """Bytes per gradient: FP32 unless the job reduces gradients in the parameters' own format."""
    c = compute_constants()
    return c.weight_bytes if job.grad_precision == "bf16" else c.grad_bytes


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


WEIGHT_REPLICA_DIMS = ("dp", "cp")
"""The parallel dimensions whose ranks hold the same non-expert weights: the group gradients are reduced over
(`weight_replicas` counts its ranks; `plan` prices the data-parallel collectives on the ranks it spans)."""


def weight_replicas(lay: Layouts) -> np.ndarray:
    """Ranks that hold the same non-expert weights: the data-parallel ranks times the context-parallel ones.
    Context-parallel ranks compute gradients of the same weights on other parts of the sequence, so gradients
    are reduced, and ZeRO shards its state, over dp x cp (Megatron-Core's data-parallel group with context
    parallelism; torchtitan's FSDP mesh `dp_shard_cp`)."""
    return np.prod([getattr(lay, dim) for dim in WEIGHT_REPLICA_DIMS], axis=0)


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
    # The two dropout masks (a byte a value each) exist only for a model trained with dropout.
    replicated: float = (10 if m.dropout else 8) * m.hidden
    if job.precision == "fp8" and job.peft is None:
        # FP8 linears keep the FP8 cast of their input for the weight-gradient GEMM, one byte a value, not the
        # BF16 input (Transformer Engine's Linear and LayerNormLinear save the quantized input): the QKV and
        # FC1 inputs (the norms' outputs) and FC2's input halve, while the attention output stays in BF16 for
        # the fused attention's backward and the projection keeps an FP8 copy beside it.
        replicated = replicated - 2 * m.hidden
        split = split + m.hidden - m.mean_ffn_width()
    if job.peft is not None:
        # Frozen linears that no adapter reads keep no input for backward (peft.unsaved_input_bytes_per_token).
        unsaved_replicated, unsaved_split = lora.unsaved_input_bytes_per_token(m, job.peft)
        replicated = replicated - unsaved_replicated
        split = split - unsaved_split
    if job.fp8_activation_store:
        # The activation function's input (both halves of a gated MLP's first GEMM output) kept in FP8.
        split = split - (2 if m.gated_mlp else 1) * m.mean_ffn_width()
    per_token = np.where(lay.sp, (replicated + split) / lay.tp, replicated + split / lay.tp)
    # Scores and softmax output (2 bytes each), and the softmax's dropout mask where the model has dropout.
    scores = (5.0 if m.dropout else 4.0) * m.heads * job.seq_len / lay.tp if not fused_attention(job) else 0.0
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


def layer_microbatches_in_flight(job: Job, lay: Layouts, stage: str = "first") -> np.ndarray:
    """Layers times micro-batches whose activations pipeline stage `stage` (first, second or last) holds when its
    first backward starts: its peak.

    Megatron-Core's schedules (Narayanan et al. 2021, Section 2.2; `schedules.py`): under 1F1B stage r runs
    p - r forwards before its first backward, at most the N micro-batches of the step. Interleaved over v chunks
    of layers / v each, stage r runs 2 (p - r - 1) + (v - 1) p chunk forwards of warm-up and one more before its
    first backward, in groups of p micro-batches per chunk (chunk 0 for micro-batches 1..p, then chunk 1, ...),
    which on the first stage is (1 + (p - 1) / (p v)) x p stages' worth, Megatron's
    `interleaved_schedule_memory_penalty` (Korthikanti et al. 2022's accounting, `theoretical_memory_usage.py`);
    where the warm-up would exceed the N v chunk forwards of the step, all of them run before the first backward
    (`are_all_microbatches_in_warmup`), so no more than N v are ever in flight. A short first (last) stage is one
    layer short in its first (last) chunk (Megatron's `account_for_embedding_in_pipeline_split`: the embedding
    takes a layer's place in the first chunk, the loss in the last; torchtitan's split gives the first and last
    chunks one layer less): that chunk's forwards hold one layer less each."""
    layers = _stage_layers(job, lay, stage)
    full = np.ceil(job.model.layers / lay.pp)
    microbatches = np.maximum(job.global_batch / (lay.dp * lay.mb), 1.0)
    rank = {"first": 0, "second": 1}.get(stage, lay.pp - 1)
    rank = np.minimum(rank, lay.pp - 1)
    interleaved = lay.v > 1
    warmup = np.where(interleaved, 2 * (lay.pp - rank - 1) + (lay.v - 1) * lay.pp + 1, lay.pp - rank)
    chunks = np.minimum(warmup, microbatches * lay.v)
    # Forwards of the short chunk among them: chunk 0 on the first stage, chunk v - 1 on the last.
    group = np.minimum(lay.pp, microbatches)
    rounds, rem = np.floor_divide(chunks, group * lay.v), np.mod(chunks, group * lay.v)
    short_chunk_forwards = rounds * group + np.where(
        stage == "last", np.maximum(rem - (lay.v - 1) * group, 0.0), np.minimum(rem, group))
    return chunks * full / lay.v - short_chunk_forwards * (full - layers)


def _in_flight_layers_bytes(job: Job, lay: Layouts, per_token: np.ndarray, stage: str = "first") -> np.ndarray:
    """Activations pipeline stage `stage` (first, second or last) holds at its peak."""
    m = job.model
    tokens = lay.mb * job.seq_len / lay.cp
    layers = _stage_layers(job, lay, stage)
    # Stage-sized micro-batches in flight (layer_microbatches_in_flight over the stage's layers).
    in_flight = layer_microbatches_in_flight(job, lay, stage) / layers
    full = lay.recompute == 2
    checkpoint = 2.0 * m.hidden / np.where(lay.sp, lay.tp, 1)
    # Under block recomputation only the recomputed layers keep just their input checkpoint.
    redone = np.where(full, recomputed_layers(job, layers), 0.0)
    # Layers whose activations go to the host keep none on the GPU (Megatron-Core's cpu_offloading_num_layers,
    # Transformer Engine's CPU offload context): the kept ones first.
    offloaded = np.minimum(layers - redone, float(job.offload_layers or 0)) if job.offload == "activations" else 0.0
    return (checkpoint * redone + per_token * (layers - redone - offloaded)) * tokens * in_flight


def _recompute_working_bytes(job: Job, lay: Layouts, per_token: np.ndarray) -> np.ndarray:
    """Full recomputation still materialises one layer's activations while that layer runs backward."""
    return np.where(lay.recompute == 2, per_token * lay.mb * job.seq_len / lay.cp, 0.0)


LOSS_BYTES_PER_LOGIT = {"megatron": 6.0, "fsdp": 12.0, "deepspeed": 12.0, "fsdp-loss-parallel": 16.0,
                        "bf16-loss": 6.0}
"""Bytes per logit the output layer and the loss hold at their peak, by framework. Megatron-Core's vocab-parallel
cross-entropy casts the BF16 logits to FP32 and computes the softmax, and in backward the gradient, in place in
that copy: 2 + 4 bytes (`calculate_logits_max` does `.float()`). PyTorch's eager `cross_entropy` on `.float()`
logits (torchtitan's loss, Hugging Face models under FSDP or DeepSpeed) keeps the BF16 logits, the FP32 copy and
the log-softmax output in forward, and in backward the log-softmax output with the FP32 gradients of its output
and of its input: 12 bytes. Under tensor parallelism torchtitan computes the loss on the vocabulary-sharded
logits (`loss_parallel`, on unless disabled), whose backward (`torch.distributed.tensor.parallel.loss`,
`_nll_loss_and_log_softmax_backward`) builds `(zeros_like(x) + exp(x)) * grad_output` beside the saved
log-softmax output: four FP32 tensors the size of the logits at once, 16 bytes. A loss that does not upcast
(NeMo Automodel's `MaskedCrossEntropy(fp32_upcast=False)`, its benchmark recipes' setting: `F.cross_entropy` on
the BF16 logits) holds the same three tensors as eager's backward in BF16: 6 bytes."""


def _framework_is(job: Job, lay: Layouts, name: str) -> np.ndarray:
    """Per layout, whether it runs under the framework `name`."""
    return per_framework(job, lay.zero, lay.pp, name.__eq__)


def _logits_bytes(job: Job, lay: Layouts) -> np.ndarray:
    """What the output layer and the loss hold at their peak on the last stage: each local token's logits
    (split by tp) at the framework's bytes per logit."""
    tokens = lay.mb * job.seq_len / lay.cp
    loss_parallel = _framework_is(job, lay, "fsdp") & (lay.tp > 1)
    eager = LOSS_BYTES_PER_LOGIT["fsdp"] if job.loss_fp32 else LOSS_BYTES_PER_LOGIT["bf16-loss"]
    per_logit = np.where(_framework_is(job, lay, "megatron"), LOSS_BYTES_PER_LOGIT["megatron"],
                         np.where(loss_parallel, LOSS_BYTES_PER_LOGIT["fsdp-loss-parallel"], eager))
    return tokens * job.model.vocab / lay.tp * per_logit


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
    grads = sharded(gradient_bytes(job), 2)
    optimizer = sharded(c.optimizer_bytes, 1)
    return _on_gpu(job, lay, weights, grads, optimizer) + _zero3_working_bytes(job, lay)


def _on_gpu(job: Job, lay: Layouts, weights: np.ndarray, grads: np.ndarray, optimizer: np.ndarray) -> np.ndarray:
    """What of the weights, gradients and optimizer states stays in GPU memory under the job's offload.
    Optimizer offload (ZeRO-Offload, Ren et al. 2021, Section 4: FP16 parameters stay on the GPU, gradients,
    optimizer states and the optimizer step go to the CPU) moves the optimizer states and, where ZeRO shards the
    gradients (stage 2 and up), the gradient shard it updates; parameter offload (FSDP's
    CPUOffload(offload_params=True): sharded parameters and their gradients live on the CPU and the optimizer
    steps there; DeepSpeed's offload_param) moves the weight shard as well. What a GPU gathers to compute
    (`_zero3_working_bytes`) stays."""
    if job.offload in ("optimizer", "parameters"):
        optimizer = np.zeros_like(optimizer)
        grads = np.where(lay.zero >= 2, 0.0, grads)
    if job.offload == "parameters":
        weights = np.where(lay.zero >= 3, 0.0, weights)
    return weights + grads + optimizer


def _peft_state_bytes(job: Job, peft: lora.Peft, lay: Layouts) -> np.ndarray:
    """The frozen base holds weights only, in its stored format; the adapters carry the full training state.
    (LoRA is refused on MoE models, so the base is dense.)"""
    m, c = job.model, compute_constants()
    params = (np.ceil(m.layers / lay.pp) * m.layer_params() + m.embedding_params()) / lay.tp
    replicas = weight_replicas(lay)
    base = params * lora.base_bytes_per_param(peft) / np.where(lay.zero >= 3, replicas, 1)
    adapters = lora.stage_trainable_params(m, peft, np.ceil(m.layers / lay.pp)) / lay.tp
    weights = adapters * c.weight_bytes / np.where(lay.zero >= 3, replicas, 1)
    grads = adapters * gradient_bytes(job) / np.where(lay.zero >= 2, replicas, 1)
    optimizer = adapters * c.optimizer_bytes / np.where(lay.zero >= 1, replicas, 1)
    return base + weights + grads + optimizer + _zero3_working_bytes(job, lay)


ZERO3_LAYERS_GATHERED = 2
"""Layers whose full weights ZeRO-3/FSDP holds at once: the one computing and the one prefetched (FSDP's
`limit_all_gathers` and FSDP2's default prefetch keep one gather ahead)."""


def _zero3_working_bytes(job: Job, lay: Layouts) -> np.ndarray:
    """What ZeRO-3 materialises beyond its shards: the gathered weights of the layers in flight and one layer's
    full gradients before their reduce-scatter."""
    c, m = compute_constants(), job.model
    sharded = (lay.zero >= 3) & (weight_replicas(lay) > 1)
    if not np.any(sharded):
        return np.zeros(len(lay))
    # A GPU gathers only its own routed experts (their shards live on the expert data-parallel ranks), and only
    # where they are sharded: with one expert data-parallel rank its experts are whole in its state already, and
    # FSDP has nothing to gather for them (nemo-automodel's and torchtitan's EP meshes leave them unsharded).
    _, _, edp = stage_params(job, lay)
    gathered_experts = np.where(edp > 1, 1.0, 0.0)
    layer = (m.layer_params() - m.expert_params_per_layer()) / lay.tp \
        + gathered_experts * m.expert_params_per_layer() / (lay.ep * lay.etp)
    working = layer * (ZERO3_LAYERS_GATHERED * c.weight_bytes + gradient_bytes(job))
    if job.peft is not None:
        adapters = lora.adapter_params_per_layer(job.model, job.peft) / lay.tp
        working = layer * ZERO3_LAYERS_GATHERED * lora.base_bytes_per_param(job.peft) + adapters * gradient_bytes(job)
    # FSDP under pipeline parallelism does not reshard a stage's weights between its micro-batches, and it
    # accumulates their gradients unsharded until the last one (torchtitan's `apply_fsdp`:
    # reshard_after_forward off with PP; the pipeline stage turns gradient sync and resharding after backward
    # off for all but the last backward): the whole stage is held gathered, with FP32 gradients beside it.
    pipelined_fsdp = sharded & (lay.pp > 1) & _framework_is(job, lay, "fsdp")
    if np.any(pipelined_fsdp):
        dense, expert, _ = stage_params(job, lay)
        expert = expert * gathered_experts
        whole_stage = (dense + expert) * (c.weight_bytes + gradient_bytes(job))
        if job.peft is not None:
            stage_adapters = lora.stage_trainable_params(m, job.peft, np.ceil(m.layers / lay.pp)) / lay.tp
            whole_stage = (dense + expert) * lora.base_bytes_per_param(job.peft) + stage_adapters * gradient_bytes(job)
        working = np.where(pipelined_fsdp, np.maximum(working, whole_stage), working)
    return np.where(sharded, working, 0.0)


def _second_embedding_bytes(job: Job, lay: Layouts) -> np.ndarray:
    """State of the output layer where it shares a GPU with the input embedding (one pipeline stage): the two
    matrices are untied, and `stage_params` counts one per stage (the first stage holds the input embedding,
    the last the output layer)."""
    if job.peft is not None:
        return np.zeros(len(lay))
    c = compute_constants()
    params = job.model.embedding_params() / lay.tp
    state = _on_gpu(job, lay, params * c.weight_bytes / np.where(lay.zero >= 3, weight_replicas(lay), 1),
                        params * gradient_bytes(job) / np.where(lay.zero >= 2, weight_replicas(lay), 1),
                        params * c.optimizer_bytes / np.where(lay.zero >= 1, weight_replicas(lay), 1))
    return np.where(lay.pp == 1, state, 0.0)


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
    working = _recompute_working_bytes(job, lay, per_token)
    # The loss's buffers are gone before the last layer is recomputed for its backward: the stage holding the
    # logits peaks at the larger of the two on top of what it stores.
    tail = np.maximum(working, _logits_bytes(job, lay))
    last = _in_flight_layers_bytes(job, lay, per_token, "last") + tail
    activations = np.where(lay.pp == 1, first + tail, np.maximum(first + working, last))
    return (state + activations) / GIB
