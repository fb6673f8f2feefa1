"""Training step time and memory for many layouts at once (numpy arrays, one element per layout).

One step processes the whole global batch: m = B / (dp * mb) micro-batches flow through pp stages with the
(interleaved) 1F1B schedule. Per micro-batch and stage: GEMMs, attention, element-wise kernels and tensor-
parallel collectives (Megatron-LM issues them on the critical path), recomputation, the last stage's logits.
Then the pipeline bubble (p-1)/v, pipeline send/recv, data-parallel gradient traffic not hidden behind the
last backward pass, and the optimizer step. Memory follows Korthikanti et al. 2022.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from linkscope.hardware.system import System
from linkscope.model.comm.collectives import collective_time
from linkscope.model.comm.params import CommFit, comm_fit
from linkscope.model.step.compute import (ComputeConstants, compute_constants, gemm_half_gflop, gemm_time_s,
                                          memory_time_s, sustained_tflops, usable_memory_gib)
from linkscope.model.ranges.mfu import mfu_peak
from linkscope.model.step.job import (FRAMEWORK_DP_OVERLAP, Job, framework_for, fused_attention, per_framework,
                                      recomputed_layers)
from linkscope.model.step.layout import MEGATRON_ORDER, Layouts, order_spans
from linkscope.model.step import knobs as knob_rules
from linkscope.model.step import peft as lora
from linkscope.model.step.memory import gradient_bytes, memory_gib_per_gpu, trainable_groups, weight_replicas
from linkscope.model.comm.tiers import CommTiers, comm_tiers
from linkscope.model.step.transformer import ModelConfig

BF16_BYTES = 2


@dataclass
class StepEstimate:
    """Arrays, one element per layout. Times in seconds for one step of the global batch."""

    step_time_s: np.ndarray
    compute_s: np.ndarray
    recompute_s: np.ndarray
    tp_comm_exposed_s: np.ndarray
    cp_comm_exposed_s: np.ndarray
    pp_comm_exposed_s: np.ndarray
    dp_comm_exposed_s: np.ndarray
    bubble_s: np.ndarray
    optimizer_s: np.ndarray
    memory_gib_per_gpu: np.ndarray
    fits: np.ndarray
    microbatches: np.ndarray
    tokens_per_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tflops_per_gpu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mfu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ep_comm_exposed_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """MoE dispatch and combine (forward and backward) on the critical path."""
    moe_fixed_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """The MoE layers' fixed time (moe.yaml moe_layer_overhead_us), forward and backward; not in compute_s."""
    tp_replay_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """The TP collectives full recomputation replays (part of recompute_s)."""
    ep_replay_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """The MoE dispatch and combine full recomputation replays (part of recompute_s)."""
    peak_bound: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """The summed parts came out faster than the model FLOPs at the MFU peak allow: the step time is held at
    that bound (100% MFU) instead."""
    knob_compute_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Encode, decode and error feedback of the data-parallel knobs (model/step/knobs.py)."""


@dataclass
class _Ctx:
    job: Job
    system: System
    tiers: CommTiers
    c: ComputeConstants
    lay: Layouts
    tokens: np.ndarray
    """Tokens per micro-batch per GPU (mb * s / cp)."""
    order: tuple[str, ...] = MEGATRON_ORDER
    """The rank order: which groups share a node."""
    _spans: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def span(self, group: str) -> tuple[np.ndarray, np.ndarray]:
        """(ranks of `group` on one node, nodes it spans) per layout, under the rank order."""
        if group not in self._spans:
            self._spans.update(order_spans(self.lay, self.system.nccl_node_gpus, self.order, (group,)))
        return self._spans[group]

    @property
    def model(self) -> ModelConfig:
        return self.job.model

    def gemm_top(self, precision: str) -> float:
        """Large-GEMM share of peak on this GPU generation in `precision`."""
        return self.c.gemm_max(self.system.node.gpu.arch, precision)

    def gemm_s(self, flops: np.ndarray, precision: str) -> np.ndarray:
        """Time of one GEMM of `flops` FLOPs in `precision` on this GPU."""
        peak, top = sustained_tflops(self.system.node.gpu, precision, self.c), self.gemm_top(precision)
        return gemm_time_s(flops, peak, self.c, top, gemm_half_gflop(self.c, peak, top))


SMALL_LAYOUTS = 8
"""Calls over up to this many layouts are memoized: the fitting procedure prices each evidence entry (one
layout) under hundreds of compute constants, and a step's collectives do not depend on them, only on the
tiers, the group sizes and message sizes, and the collective model's own fitted constants (part of the key)."""


def _coll(ctx: _Ctx, op: str, size_bytes: np.ndarray, ranks: np.ndarray, group: str) -> np.ndarray:
    """One collective of `size_bytes` over `ranks` of `group`, on the nodes the rank order spreads it over."""
    size, ranks, nodes = np.broadcast_arrays(np.asarray(size_bytes, dtype=float), np.asarray(ranks, dtype=float),
                                             ctx.span(group)[1])
    if size.size <= SMALL_LAYOUTS:
        times = _coll_small_s(op, ctx.tiers, tuple(size.ravel().tolist()), tuple(ranks.ravel().tolist()),
                              tuple(nodes.ravel().tolist()), comm_fit())
        return np.asarray(times).reshape(size.shape)
    return _coll_vector_s(op, ctx.tiers, size, ranks, nodes)


@functools.lru_cache(maxsize=8192)
def _coll_small_s(op: str, tiers: CommTiers, size: tuple[float, ...], ranks: tuple[float, ...],
                  nodes: tuple[float, ...], fit: CommFit) -> tuple[float, ...]:
    # fit is only part of the key: collective_time reads the fit in force itself.
    return tuple(_coll_vector_s(op, tiers, np.asarray(size), np.asarray(ranks), np.asarray(nodes)).tolist())


def _coll_vector_s(op: str, tiers: CommTiers, size: np.ndarray, ranks: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The collective's time per element, priced once per distinct (size, ranks, nodes): a search's thousands of
    layouts share a few dozen message sizes and group spans (4,602 layouts of a 1T model on 4,096 H100s: at most
    32 per collective), and the collective model works element by element."""
    size, ranks, nodes = np.broadcast_arrays(size, ranks, nodes)
    if size.size <= SMALL_LAYOUTS:
        return collective_time(op, tiers, size, ranks, nodes, labels=False).time_us * 1e-6
    columns = [np.ravel(a) for a in (size, ranks, nodes)]
    first, inverse = _distinct_rows(*columns)
    size_d, ranks_d, nodes_d = (c[first] for c in columns)
    distinct = collective_time(op, tiers, size_d, ranks_d, nodes_d, labels=False).time_us * 1e-6
    return distinct[inverse].reshape(size.shape)


_WHOLE_CODE_LIMIT = 1 << 20
"""Rank and node counts below this are their own codes; larger ones are numbered by np.unique, so that a row's code
(at most rows x 2^40) stays inside int64."""


def _distinct_rows(size: np.ndarray, ranks: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one index per distinct (size, ranks, nodes) row, each row's distinct row): one sort, of the sizes; the
    rank and node counts are whole numbers, so the row's code is arithmetic on them."""
    _, code = np.unique(size, return_inverse=True)
    for column in (ranks, nodes):
        whole = column.astype(np.int64)
        if not np.array_equal(whole, column) or whole.min() < 0 or whole.max() >= _WHOLE_CODE_LIMIT:
            _, whole = np.unique(column, return_inverse=True)
        code = code * (int(whole.max()) + 1) + whole
    span = int(code.max()) + 1
    if span > 4 * code.size:
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        return first, inverse
    slot = np.full(span, -1, dtype=np.int64)
    slot[code] = np.arange(code.size)
    present = slot >= 0
    return slot[present], (np.cumsum(present) - 1)[code]


def _layer_gemms_s(ctx: _Ctx) -> np.ndarray:
    """Forward GEMM time of one layer: QKV, output projection, FFN up (and gate), FFN down; for an MoE model the
    mean over its dense and MoE layers."""
    m, tp, tok = ctx.model, ctx.lay.tp, ctx.tokens
    attention = [m.attention_params()] if m.kv_lora_rank else [m.hidden * (m.q_dim + 2 * m.kv_dim),
                                                              m.q_dim * m.hidden]
    mlp = [*([m.hidden * m.ffn_hidden] * (m.ffn_matrices - 1)), m.ffn_hidden * m.hidden]
    total = np.zeros(np.shape(tok))
    for w in attention:
        total = total + ctx.gemm_s(2.0 * tok * w / tp, ctx.job.precision)
    dense_mlp = np.zeros(np.shape(tok))
    for w in mlp:
        dense_mlp = dense_mlp + ctx.gemm_s(2.0 * tok * w / tp, ctx.job.precision)
    if not m.is_moe:
        return total + dense_mlp
    moe_share = m.moe_layers / m.layers
    return total + (1 - moe_share) * dense_mlp + moe_share * _expert_gemms_s(ctx)


def _expert_gemms_s(ctx: _Ctx) -> np.ndarray:
    """Forward GEMMs of one MoE layer: each rank runs its experts / ep local experts as a grouped GEMM on the
    tokens routed to them (fewer tokens per expert, so less efficient GEMMs, as ep grows small per-expert
    batches), plus the shared experts on all its tokens under tensor parallelism."""
    m, lay = ctx.model, ctx.lay
    local = m.experts / lay.ep
    # Balanced routing: the rank's tokens (tp splits them with sequence parallelism) times topk copies, spread
    # over the EP group, gathered across the etp ranks that split each expert.
    per_expert = ctx.tokens / lay.tp * m.topk * lay.ep / m.experts * lay.etp
    matrix_flops = 2.0 * per_expert * m.hidden * m.moe_ffn_hidden / lay.etp
    # The layer waits for the busiest rank: its experts get moe_imbalance times the mean tokens.
    routed = local * m.ffn_matrices * ctx.gemm_s(matrix_flops * ctx.job.moe_imbalance, ctx.job.precision)
    shared = m.shared_experts * m.ffn_matrices * ctx.gemm_s(2.0 * ctx.tokens * m.hidden * m.moe_ffn_hidden / lay.tp,
                                                           ctx.job.precision)
    return routed + shared + _router_gemm_s(ctx)


def _router_gemm_s(ctx: _Ctx) -> np.ndarray:
    """The router's gating GEMM of one MoE layer (hidden -> experts scores for the rank's tokens). It runs in
    BF16 whatever the layers' format: Transformer Engine's FP8 recipes cast only the linear layers, and Megatron-Core
    builds the router as a plain weight (moe/router.py), optionally in FP32 (moe_router_dtype)."""
    m = ctx.model
    return ctx.gemm_s(2.0 * ctx.tokens / ctx.lay.tp * m.hidden * m.experts, "bf16")


def _ep_comm_s(ctx: _Ctx) -> np.ndarray:
    """One dispatch plus one combine of an average layer (MoE layers' share), per micro-batch, with the
    dispatcher the job names: Megatron's alltoall (NCCL all-to-allv, BF16) or DeepEP's hierarchical kernels
    (FP8 dispatch when the job trains in FP8). The EP group's ranks are etp apart within a pipeline stage
    (Megatron's expert rank order); the rank order decides how many share a node."""
    m, lay = ctx.model, ctx.lay
    out = np.zeros(len(lay))
    if not m.is_moe:
        return out
    # Imported here: a dense model's step never needs the MoE model or its data file.
    from linkscope.model.comm.moe import MoeRequest, predict_moe, runnable_kernel, transport_problem

    kernel, precision = ("normal", "fp8" if ctx.job.precision == "fp8" else "bf16") \
        if ctx.job.moe_dispatcher == "deepep" else ("nccl", "bf16")
    tokens = np.broadcast_to(ctx.tokens / lay.tp, (len(lay),))
    per_node = ctx.span("ep")[0]
    cache: dict[tuple[int, int, int], float] = {}
    for i in range(len(lay)):
        ep = int(lay.ep[i])
        if ep == 1:
            continue
        key = (ep, int(per_node[i]), max(1, round(float(tokens[i]))))
        if key not in cache:
            problem = transport_problem(ctx.tiers, kernel, ctx.job.moe_transport, -(-ep // key[1]))
            if problem is not None:
                # A layout whose expert group the transport cannot carry (nvlink across nodes) does not run.
                cache[key] = math.inf
                out[i] = math.inf
                continue
            runs = runnable_kernel(ctx.tiers, kernel, ctx.job.moe_transport, -(-ep // key[1]))
            req = MoeRequest(ep=ep, tokens_per_rank=key[2], hidden=m.hidden, topk=m.topk, experts=m.experts,
                             precision=precision, kernel=runs, imbalance=ctx.job.moe_imbalance,
                             transport=ctx.job.moe_transport)
            p = predict_moe(ctx.tiers, req, per_node=key[1])
            cache[key] = (p.dispatch_us + p.combine_us) * 1e-6
        out[i] = cache[key]
    return out * m.moe_layers / m.layers


def _moe_share(ctx: _Ctx) -> float:
    m = ctx.model
    return m.moe_layers / m.layers if m.is_moe else 0.0


def _moe_host_s(ctx: _Ctx) -> np.ndarray | float:
    """Fixed time of an average layer's forward pass for its MoE share (moe.yaml): time the GPU waits on the CPU
    issuing an MoE layer's kernels, which does not shrink with fewer tokens; a part per layer
    (moe_layer_overhead_us) and a part per local expert (moe_expert_overhead_us x experts / ep), the work the
    grouped expert layers issue expert by expert. Fine-grained models at a small EP hold many local experts."""
    if not ctx.model.is_moe:
        return 0.0
    from linkscope.model.comm.moe import moe_constants

    c = moe_constants()
    local_experts = ctx.model.experts / ctx.lay.ep
    return (c.moe_layer_overhead_us + c.moe_expert_overhead_us * local_experts) * 1e-6 * _moe_share(ctx)


FLASH_BACKWARD_RATIO = 2.5
"""Backward / forward FLOPs of a fused attention kernel: its backward recomputes the scores (QK^T) from the
saved softmax statistics and runs four more matmuls, five in all against the forward's two (Dao 2023,
FlashAttention-2, Section 4: "the backward pass [has] 2.5x the FLOPs of the forward")."""


def _attention_core_width(m: ModelConfig) -> float:
    """Mean of the QK^T and scores x V widths per token: heads x head_dim, which is the hidden size unless the
    model gives head_dim (Qwen3's MoE models and gpt-oss: twice or 1.4x it); latent attention's keys carry the
    rotary part too (DeepSeek-V3: 128 heads x 192 for QK^T, x 128 for scores x V)."""
    if m.kv_lora_rank:
        return m.heads * (m.head_dim + m.qk_rope_head_dim + (m.v_head_dim or m.head_dim)) / 2
    return float(m.q_dim)


def _attention_s(ctx: _Ctx) -> np.ndarray:
    """Forward attention core (QK^T and scores x V) of one layer."""
    m, lay = ctx.model, ctx.lay
    full_flops = 2.0 * ctx.tokens * ctx.job.seq_len * _attention_core_width(m) * 2 / lay.tp
    peak = sustained_tflops(ctx.system.node.gpu, "bf16", ctx.c)
    if fused_attention(ctx.job):
        # A fused kernel skips the masked half of a causal score matrix.
        share = ctx.c.attention_share(ctx.job.attention, ctx.system.node.gpu.arch)
        return 0.5 * full_flops / (peak * 1e12 * share)
    return 2 * ctx.gemm_s(full_flops / 2, "bf16")


def _elementwise_bytes(ctx: _Ctx, backward: bool) -> np.ndarray:
    """HBM traffic of one layer's norms, dropouts, residual adds, activation and (unfused) softmax."""
    m, lay = ctx.model, ctx.lay
    n_h = ctx.tokens * m.hidden / np.where(lay.sp, lay.tp, 1)
    n_f = ctx.tokens * m.mean_ffn_width() / lay.tp
    per_h = (2 * 6 + 2 * 7) if backward else (2 * 4 + 2 * 7)
    per_f = (10 if m.gated_mlp else 6) if backward else (6 if m.gated_mlp else 4)
    return per_h * n_h + per_f * n_f + _scores_bytes(ctx, backward) + _permute_bytes(ctx) + _router_bytes(ctx)


PERMUTE_PASSES = 4
"""Passes over the topk token copies an MoE layer makes in HBM per direction: permute (tokens into expert order
before dispatch) and the sort by local expert after it, then the same two in reverse around combine; each pass
reads and writes the copies."""


def _permute_bytes(ctx: _Ctx) -> np.ndarray | float:
    """HBM traffic of an average layer's token permutation (MoE layers' share; the same again in backward)."""
    m = ctx.model
    if not m.is_moe:
        return 0.0
    copies = ctx.tokens / ctx.lay.tp * m.topk * m.hidden * BF16_BYTES
    return PERMUTE_PASSES * 2 * copies * m.moe_layers / m.layers


ROUTER_PASSES = 4
"""Passes over a token's FP32 expert scores an MoE layer's router makes in HBM per direction: the gating GEMM writes
the logits, the (fused) softmax and top-k read them and write the probabilities, the load-balancing loss reads
those; each pass moves experts x 4 bytes per token, so a router over 256 experts moves 32 times a top-2-of-8's."""


def _router_bytes(ctx: _Ctx) -> np.ndarray | float:
    """HBM traffic of an average layer's router scores (MoE layers' share; the same again in backward)."""
    m = ctx.model
    if not m.is_moe:
        return 0.0
    return ROUTER_PASSES * ctx.tokens / ctx.lay.tp * m.experts * 4 * m.moe_layers / m.layers


def _scores_bytes(ctx: _Ctx, backward: bool) -> np.ndarray | float:
    """HBM traffic of unfused attention's score matrix: scale-mask-softmax and dropout (none when fused)."""
    if fused_attention(ctx.job):
        return 0.0
    n_a = ctx.tokens * (ctx.model.heads / ctx.lay.tp) * ctx.job.seq_len
    return (11 if backward else 9) * n_a


def _tp_comm_s(ctx: _Ctx, forward: bool) -> np.ndarray:
    """Tensor-parallel collectives of one layer: 2 all-reduces, or with SP 2 all-gathers + 2 reduce-scatters
    (backward adds 2 all-gathers Megatron redoes for the weight gradients)."""
    lay = ctx.lay
    size = ctx.tokens * ctx.model.hidden * BF16_BYTES
    ar = _coll(ctx, "all_reduce", size, lay.tp, "tp")
    ag = _coll(ctx, "all_gather", size, lay.tp, "tp")
    rs = _coll(ctx, "reduce_scatter", size, lay.tp, "tp")
    # A frozen base has no weight gradients, so its backward skips the all-gathers redone for them.
    sp_time = 2 * (ag + rs) if forward or ctx.job.peft is not None else 4 * ag + 2 * rs
    return np.where(lay.tp > 1, np.where(lay.sp, sp_time, 2 * ar), 0.0)


def _cp_comm_exposed_s(ctx: _Ctx, attention_s: np.ndarray, forward: bool) -> np.ndarray:
    """Context parallelism: K and V circulate among the cp ranks, hidden behind the attention core if fast."""
    lay, m = ctx.lay, ctx.model
    size = 2.0 * ctx.tokens * lay.cp * m.kv_dim / lay.tp * BF16_BYTES
    comm = _coll(ctx, "all_gather", size, lay.cp, "cp")
    if not forward:
        comm = comm + _coll(ctx, "reduce_scatter", size, lay.cp, "cp")
    return np.where(lay.cp > 1, np.maximum(comm - attention_s, 0.0), 0.0)


@dataclass
class _LayerTimes:
    fwd_compute: np.ndarray
    bwd_compute: np.ndarray
    fwd_tp: np.ndarray
    bwd_tp: np.ndarray
    cp: np.ndarray
    recompute: np.ndarray
    ep: np.ndarray
    """Dispatch and combine of one layer in forward (and as many again in backward)."""
    moe_fixed: np.ndarray | float
    """The MoE fixed time of an average layer, forward plus backward (part of fwd_compute and bwd_compute)."""


def _adapter_s(ctx: _Ctx) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) time of one layer's LoRA adapters and of expanding a stored base (NF4, FP8) to the
    GEMMs' format; zero without PEFT. Adapter GEMMs are skinny (r wide), so they reach little of peak."""
    peft = ctx.job.peft
    zero = np.zeros(np.shape(ctx.tokens))
    if peft is None:
        return zero, zero
    fwd = zero
    for d_in, d_out in lora.adapted_shapes(ctx.model, peft.targets):
        fwd = fwd + ctx.gemm_s(2.0 * ctx.tokens * d_in * peft.rank / ctx.lay.tp, ctx.job.precision) \
            + ctx.gemm_s(2.0 * ctx.tokens * peft.rank * d_out / ctx.lay.tp, ctx.job.precision)
    dequant = zero
    if lora.dequantizes(peft, ctx.job.precision):
        layer_bytes = ctx.model.layer_params() / ctx.lay.tp * lora.dequant_bytes_per_param(peft)
        dequant = dequant + memory_time_s(layer_bytes, ctx.system.node.gpu, ctx.c)
    return fwd + dequant, 2 * fwd + dequant


def _layer_times(ctx: _Ctx) -> _LayerTimes:
    overhead = ctx.c.layer_overhead_us * 1e-6
    gemm, attn = _layer_gemms_s(ctx), _attention_s(ctx)
    fwd_mem = memory_time_s(_elementwise_bytes(ctx, False), ctx.system.node.gpu, ctx.c)
    bwd_mem = memory_time_s(_elementwise_bytes(ctx, True), ctx.system.node.gpu, ctx.c)
    adapter_fwd, adapter_bwd = _adapter_s(ctx)
    fwd_compute = gemm + attn + fwd_mem + overhead + adapter_fwd
    attn_bwd = (FLASH_BACKWARD_RATIO if fused_attention(ctx.job) else 2.0) * attn
    # A frozen base's backward computes activation gradients only: one GEMM per weight, not two.
    base_bwd_gemms = 1 if ctx.job.peft is not None else 2
    bwd_compute = base_bwd_gemms * gemm + attn_bwd + bwd_mem + overhead + adapter_bwd
    fwd_tp, bwd_tp = _tp_comm_s(ctx, True), _tp_comm_s(ctx, False)
    if ctx.job.tp_overlap:
        # Userbuffers split each TP collective into chunks pipelined with the GEMM next to it.
        fwd_tp = _overlapped(fwd_tp, gemm, ctx.c.tp_comm_overlap)
        bwd_tp = _overlapped(bwd_tp, base_bwd_gemms * gemm, ctx.c.tp_comm_overlap)
    cp = _cp_comm_exposed_s(ctx, attn, True) + _cp_comm_exposed_s(ctx, attn_bwd, False)
    # Selective recompute redoes the attention core (and its unfused softmax); full redoes the forward.
    softmax = memory_time_s(_scores_bytes(ctx, False), ctx.system.node.gpu, ctx.c)
    selective = np.where(fused_attention(ctx.job), 0.0, attn + softmax)
    ep = _ep_comm_s(ctx)
    # Backward issues a data and a weight gradient kernel for each forward GEMM: twice the forward's kernels.
    fwd_compute = fwd_compute + _moe_host_s(ctx)
    bwd_compute = bwd_compute + base_bwd_gemms * _moe_host_s(ctx)
    recompute = np.select([ctx.lay.recompute == 2, ctx.lay.recompute == 1], [fwd_compute + fwd_tp + ep, selective],
                          0.0)
    return _LayerTimes(fwd_compute, bwd_compute, fwd_tp, bwd_tp, cp, recompute, ep,
                       (1 + base_bwd_gemms) * _moe_host_s(ctx))


def _logits_s(ctx: _Ctx) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward time of the output layer and the loss, which the last stage carries. The output
    layer runs in BF16 whatever the layers' format: FP8 recipes cast only the transformer layers' linears
    (Megatron-Core builds the output layer as a plain ColumnParallelLinear, not a Transformer Engine module;
    torchtitan's float8 converter skips it, filter_fqns = ["output"])."""
    m = ctx.model
    fwd = ctx.gemm_s(2.0 * ctx.tokens * m.hidden * m.vocab / ctx.lay.tp, "bf16")
    loss = memory_time_s(ctx.tokens * m.vocab / ctx.lay.tp * 4 * 3, ctx.system.node.gpu, ctx.c)
    peft = ctx.job.peft
    if peft is None:
        return fwd + loss, 2 * fwd + loss
    adapter = ctx.gemm_s(2.0 * ctx.tokens * lora.output_adapter_params(m, peft) / ctx.lay.tp, "bf16") \
        if lora.output_adapter_params(m, peft) else 0.0
    return fwd + loss + adapter, fwd + loss + 2 * adapter


def _pp_comm_s(ctx: _Ctx) -> np.ndarray:
    """One activation (or gradient) transfer between neighbouring stages, split over the tp ranks."""
    lay = ctx.lay
    size = ctx.tokens * ctx.model.hidden * BF16_BYTES / lay.tp
    return np.where(lay.pp > 1, _coll(ctx, "sendrecv", size, np.full_like(lay.pp, 2), "pp"), 0.0)


def _pp_exposed_s(ctx: _Ctx, stage_busy_s: np.ndarray) -> np.ndarray:
    """Send/recv per micro-batch on the critical path. Plain 1F1B waits for each transfer; the interleaved
    schedule posts them while the next model chunk computes (Megatron overlap_p2p_comm), so only what
    outlasts a chunk's compute shows."""
    lay = ctx.lay
    transfers = 2 * lay.v * _pp_comm_s(ctx)
    chunk_s = stage_busy_s / lay.v
    return np.where(lay.v > 1, np.maximum(transfers - 2 * lay.v * chunk_s, 0.0), transfers)


def _stage_trainable(ctx: _Ctx) -> np.ndarray:
    """Parameters one GPU trains: all it holds (routed experts split by ep x etp), or under PEFT its adapters."""
    return sum((params for params, _, _ in trainable_groups(ctx.job, ctx.lay)), np.zeros(len(ctx.lay)))


def _dp_comm_s(ctx: _Ctx) -> tuple[np.ndarray, np.ndarray]:
    """(gradient reduction, parameter all-gather) of one step: what trains, each group across its data-parallel
    ranks (non-expert weights or adapters across dp, routed experts across their expert data-parallel ranks)."""
    lay, c = ctx.lay, ctx.c
    grads, gather = np.zeros(len(lay)), np.zeros(len(lay))
    grad_bytes = gradient_bytes(ctx.job)
    # trainable_groups lists the weight replicas' group first, then the routed experts' (expert data parallel).
    for (params, ranks, _), group in zip(trainable_groups(ctx.job, lay), ("dp", "edp")):
        if not np.any(params > 0):
            continue
        if ctx.job.knobs.active:
            ar, rs = _knob_reduction_s(ctx, np.maximum(params, 1.0) * grad_bytes, ranks, group)
        else:
            ar = _coll(ctx, "all_reduce", np.maximum(params, 1.0) * grad_bytes, ranks, group)
            rs = _coll(ctx, "reduce_scatter", np.maximum(params, 1.0) * grad_bytes, ranks, group)
        ag = _coll(ctx, "all_gather", np.maximum(params, 1.0) * c.weight_bytes, ranks, group)
        grads = grads + np.where(ranks > 1, np.where(lay.zero >= 1, rs, ar), 0.0)
        gather = gather + np.where((ranks > 1) & (lay.zero >= 1), ag, 0.0)
    return grads, gather


def _knob_reduction_s(ctx: _Ctx, grad_total_bytes: np.ndarray, ranks: np.ndarray,
                      group: str) -> tuple[np.ndarray, np.ndarray]:
    """(all-reduce, reduce-scatter) time of the gradients under the job's knobs: the compressed bytes
    (knobs.grad_wire_factor), in one collective per bucket when a bucket size is given (each pays the
    collective's latency) and as many collectives per bucket as the compression issues (PowerSGD: P, then Q)."""
    knobs = ctx.job.knobs
    factor = knob_rules.grad_wire_factor(knobs, ctx.model, ctx.lay.tp, gradient_bytes(ctx.job))
    per_bucket = knob_rules.knob_facts().compressions[knobs.compression].collectives_per_bucket
    buckets = np.ones(np.shape(grad_total_bytes)) if knobs.bucket_mb is None else \
        np.maximum(np.ceil(grad_total_bytes / (knobs.bucket_mb * knob_rules.MIB)), 1.0)
    count = buckets * per_bucket
    size = grad_total_bytes * factor / count
    return (count * _coll(ctx, "all_reduce", size, ranks, group),
            count * _coll(ctx, "reduce_scatter", size, ranks, group))


def _knob_compute_s(ctx: _Ctx, m_count: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """GPU time the knobs add to a step: passes over the gradients to encode, decode and keep the error
    (HBM-bound element-wise kernels), PowerSGD's three skinny GEMMs per matrix (P = MQ, Q = M^T P, M ~ P Q^T),
    each reading the whole gradient matrix, so priced at HBM speed or TF32 (half the BF16 peak), whichever is
    slower; and ZeRO++'s quantise/dequantise passes on every gather and reduce-scatter. Counted on the critical
    path: the kernels share the GPU with backward and run inside the hook before each bucket is sent."""
    knobs, lay = ctx.job.knobs, ctx.lay
    out = np.zeros(len(lay))
    if not knobs.active:
        return out
    facts = knob_rules.knob_facts()
    gpu, c = ctx.system.node.gpu, ctx.c
    grad_bytes = gradient_bytes(ctx.job)
    grads = _stage_trainable(ctx) * grad_bytes
    # ZeRO-2 and ZeRO-3 reduce every micro-batch; the other stages once per step.
    reductions = np.where(lay.zero >= 2, m_count, 1.0)
    comp = facts.compressions[knobs.compression]
    passes = comp.hbm_passes
    if knobs.compression == "powersgd":
        passes += 3 * (1.0 - _vector_share(ctx))
        flops = 2 * 3 * knobs.powersgd_rank * _stage_trainable(ctx) * (1.0 - _vector_share(ctx))
        tf32_s = flops / (0.5 * sustained_tflops(gpu, "bf16", c) * 1e12)
        out = out + reductions * np.maximum(tf32_s, 0.0)
    out = out + reductions * memory_time_s(2 * passes * grads, gpu, c)
    if knobs.zeropp:
        layer_params = ctx.model.layer_params() / lay.tp
        gathered = 2 * layers * layer_params * c.weight_bytes * m_count
        reduced = layers * layer_params * grad_bytes * m_count
        zp = facts.zeropp
        moved = (zp["qw"].hbm_passes * gathered / 2 if "qw" in knobs.zeropp else 0.0) + \
            (zp["qg"].hbm_passes * reduced if "qg" in knobs.zeropp else 0.0)
        out = out + np.where(lay.zero >= 3, memory_time_s(2 * np.asarray(moved, dtype=float), gpu, c), 0.0)
    return out


def _vector_share(ctx: _Ctx) -> float:
    """Share of a layer's weights outside its matrices (norms, biases): PowerSGD sends them whole."""
    whole = sum(rows * cols for rows, cols in knob_rules.matrix_shapes(ctx.model))
    return max(0.0, 1.0 - whole / max(ctx.model.layer_params(), 1))


def knob_memory_gib(job: Job, lay: Layouts, per_node_gpus: int) -> np.ndarray:
    """Memory per GPU the knobs add: error-feedback buffers (gradient-sized, PowerSGD and 1-bit Adam) and ZeRO++'s
    secondary weight partition (hp: the stage's weights split over the GPUs of one node)."""
    out = np.zeros(len(lay))
    knobs = job.knobs
    if not knobs.active:
        return out
    trainable = sum((params for params, _, _ in trainable_groups(job, lay)), np.zeros(len(lay)))
    copies = knob_rules.knob_facts().compressions[knobs.compression].gradient_copies
    out = out + copies * trainable * gradient_bytes(job)
    if "hp" in knobs.zeropp:
        stage_params = np.ceil(job.model.layers / lay.pp) * job.model.layer_params() / lay.tp
        replicas = weight_replicas(lay)
        out = out + np.where(lay.zero >= 3, stage_params * compute_constants().weight_bytes /
                             np.maximum(np.minimum(replicas, per_node_gpus), 1), 0.0)
    return out / 2**30


ZERO3_GATHERS_PER_LAYER = {"fsdp": 1, "megatron": 1}
"""All-gathers (and gradient reduce-scatters) per layer and pass of a ZeRO-3 framework: PyTorch FSDP and
Megatron-FSDP flatten each transformer block into one unit, so one collective carries the whole layer. DeepSpeed
ZeRO-3 gathers parameter by parameter (each weight matrix of the layer is its own all-gather: QKV, the
projection and the MLP's matrices; norms and biases below `stage3_param_persistence_threshold` stay whole on
every rank), so each pays the collective's latency; `zero3_collectives` counts them from the model."""


def zero3_collectives(job: Job) -> int:
    """Collectives one layer's ZeRO-3 gather (and gradient reduce-scatter) splits into under the job's
    framework (one for an MoE model, whose expert weights are grouped differently)."""
    framework = framework_for(job.framework, 3)
    if framework in ZERO3_GATHERS_PER_LAYER or job.model.is_moe:
        return ZERO3_GATHERS_PER_LAYER.get(framework, 1)
    return 2 + job.model.ffn_matrices


def _zero3_exposed_s(ctx: _Ctx, lt: _LayerTimes, layers: np.ndarray, m_count: np.ndarray) -> np.ndarray:
    """ZeRO-3 / FSDP gathers each layer's weights in forward and again in backward and reduce-scatters its
    gradients, every micro-batch (the sharded gradients cannot accumulate locally). Prefetching keeps one layer
    ahead, so per layer what outlasts that layer's compute shows, and the overlapped part costs a share
    (1 - zero3_overlap) of itself: the collectives' kernels take SMs and HBM from the layer's own. At each end
    nothing hides them: the first layer's gather precedes any forward compute, and the last reduce-scatter of
    a backward pass runs after its compute has finished."""
    lay, c, m = ctx.lay, ctx.c, ctx.model
    # Routed experts are sharded over their expert data-parallel ranks, not over dp x cp: a GPU gathers its
    # own experts' shards (ep x etp apart), and the rest of the layer across its weight replicas.
    expert = m.expert_params_per_layer()
    layer_params = (m.layer_params() - expert) / lay.tp
    replicas = weight_replicas(lay)
    edp = np.maximum(lay.tp * lay.cp * lay.dp // (lay.ep * lay.etp), 1)
    expert_params = expert / (lay.ep * lay.etp)
    sharded = (lay.zero >= 3) & ((replicas > 1) | ((edp > 1) & (expert > 0)))
    if not np.any(sharded):
        return np.zeros(len(lay))
    peft = ctx.job.peft
    # Under PEFT the frozen base is still gathered (in its stored format), but only adapter gradients reduce.
    weight_bytes = c.weight_bytes if peft is None else lora.base_bytes_per_param(peft)
    grad_params = layer_params if peft is None else lora.adapter_params_per_layer(m, peft) / lay.tp
    # Each collective of the layer carries its share of the bytes and pays the collective's own latency.
    k = zero3_collectives(ctx.job)
    knobs = ctx.job.knobs
    grad_bytes = gradient_bytes(ctx.job)
    # ZeRO++: qw sends the forward gather in INT8, qg the reduce-scatter in INT4, hp keeps the backward gather on
    # the node's own GPUs (a secondary partition), so it crosses no network.
    qw, qg = knob_rules.zeropp_factor(knobs, "qw", weight_bytes), knob_rules.zeropp_factor(knobs, "qg", grad_bytes)
    ag = np.where(replicas > 1, k * _coll(ctx, "all_gather", layer_params * weight_bytes / k, replicas, "dp"), 0.0)
    ag_fwd = ag if qw == 1.0 else \
        np.where(replicas > 1, k * _coll(ctx, "all_gather", layer_params * weight_bytes * qw / k, replicas, "dp"), 0.0)
    ag_bwd = ag
    if "hp" in knobs.zeropp:
        local = np.minimum(replicas, ctx.system.nccl_node_gpus)
        size = np.broadcast_to(layer_params * weight_bytes / k, np.shape(local)).astype(float)
        ag_bwd = np.where(local > 1, k * _coll_vector_s("all_gather", ctx.tiers, size, local.astype(float),
                                                         np.ones(np.shape(local))), 0.0)
    # FP16/BF16 compression (FSDP's reduce_dtype) shrinks the reduce-scatter the same way.
    grad_factor = qg * knob_rules.grad_wire_factor(knobs, ctx.model, ctx.lay.tp, grad_bytes)
    rs = np.where(replicas > 1,
                  k * _coll(ctx, "reduce_scatter", grad_params * grad_bytes * grad_factor / k, replicas, "dp"), 0.0)
    if expert:
        extra = np.where(edp > 1, _coll(ctx, "all_gather", expert_params * weight_bytes, edp, "edp"), 0.0)
        ag_fwd, ag_bwd = ag_fwd + extra, ag_bwd + extra
        if peft is None:
            rs = rs + np.where(edp > 1, _coll(ctx, "reduce_scatter", expert_params * grad_bytes, edp, "edp"), 0.0)
    ag = ag_fwd
    fwd = _overlapped(ag, lt.fwd_compute, c.zero3_overlap)
    bwd = _overlapped(ag_bwd + rs, lt.bwd_compute, c.zero3_overlap)
    ends = (ag - fwd) + np.minimum(rs, bwd)
    per_micro_batch = (fwd + bwd) * layers + ends
    return np.where(sharded, per_micro_batch * m_count, 0.0)


def _overlapped(comm_s: np.ndarray, compute_s: np.ndarray, overlap: float) -> np.ndarray:
    """Exposed time of `comm_s` run beside `compute_s`: what outlasts the compute, plus the unhidden share."""
    return np.maximum(comm_s - compute_s, 0.0) + (1.0 - overlap) * np.minimum(comm_s, compute_s)


def _optimizer_s(ctx: _Ctx) -> np.ndarray:
    lay, c = ctx.lay, ctx.c
    shard = sum((params / np.where(lay.zero >= 1, ranks, 1) for params, ranks, _ in trainable_groups(ctx.job, lay)),
                np.zeros(len(lay)))
    return memory_time_s(shard * c.optimizer_traffic_bytes, ctx.system.node.gpu, c)


def dp_overlap_of(job: Job, zero: np.ndarray, pp: np.ndarray | int = 1) -> np.ndarray:
    """Per layout, whether gradient reduction overlaps backward: the job's choice, else its framework's
    default for the layout's ZeRO stage and pipeline depth."""
    if job.dp_overlap is not None:
        return np.full(np.shape(zero), job.dp_overlap)
    return per_framework(job, zero, pp, FRAMEWORK_DP_OVERLAP.__getitem__)


def _dp_exposed_s(ctx: _Ctx, lt: _LayerTimes, layers: np.ndarray, m_count: np.ndarray,
                  stage_fwd: np.ndarray, stage_bwd: np.ndarray) -> np.ndarray:
    grads, gather = _dp_comm_s(ctx)
    # Gradients of a micro-batch are reduced bucket by bucket while its backward pass runs, but the last
    # bucket (the first layers' gradients) is only ready when backward ends: it always shows. The parameter
    # all-gather of a sharded optimizer overlaps the next step's first forward.
    knobs = ctx.job.knobs
    bucket_params = ctx.c.dp_bucket_params if knobs.bucket_mb is None else \
        knobs.bucket_mb * knob_rules.MIB / gradient_bytes(ctx.job)
    last_bucket = np.minimum(1.0, bucket_params / np.maximum(_stage_trainable(ctx), 1.0))
    overlap = dp_overlap_of(ctx.job, ctx.lay.zero, ctx.lay.pp)
    if knobs.compression == "onebit":
        # 1-bit Adam communicates the compressed momentum inside the optimizer step, after backward.
        overlap = np.zeros(np.shape(overlap), dtype=bool)
    grads = np.where(overlap, np.maximum(grads - stage_bwd, grads * last_bucket), grads)
    gather = np.where(overlap, np.maximum(gather - stage_fwd, gather * last_bucket), gather)
    # ZeRO-2 keeps only its shard of the gradients, so it cannot sum micro-batches locally: every backward
    # reduce-scatters (DeepSpeed stage 2; FSDP SHARD_GRAD_OP outside no_sync). Stages 0 and 1 accumulate
    # full-size gradients and reduce once per step.
    grads = grads * np.where(ctx.lay.zero == 2, m_count, 1.0)
    classic = np.where(ctx.lay.zero >= 3, 0.0, grads + gather)
    return classic + _zero3_exposed_s(ctx, lt, layers, m_count)


def estimate_steps(job: Job, system: System, layouts: Layouts, tiers: CommTiers | None = None,
                   order: tuple[str, ...] = MEGATRON_ORDER) -> StepEstimate:
    """Step time, its breakdown and memory per GPU for every layout (arrays), with ranks in `order`."""
    lay = layouts
    ctx = _Ctx(job=job, system=system, tiers=tiers or comm_tiers(system), c=compute_constants(), lay=lay,
               tokens=lay.mb * job.seq_len / lay.cp, order=order)
    lt = _layer_times(ctx)
    layers = np.ceil(job.model.layers / lay.pp)
    m_count = job.global_batch / (lay.dp * lay.mb)
    logits_f, logits_b = _logits_s(ctx)
    compute_mb = layers * (lt.fwd_compute + lt.bwd_compute) + logits_f + logits_b
    tp_mb = layers * (lt.fwd_tp + lt.bwd_tp + lt.cp)
    # Dispatch and combine run once in forward and once more (as their transposes) in backward: exposed, or
    # under 1F1B A2A overlap hidden behind the other micro-batch's compute of the same layer.
    ep_mb = layers * 2 * lt.ep
    if job.moe_a2a_overlap:
        ep_mb = layers * np.maximum(2 * lt.ep - (lt.fwd_compute + lt.bwd_compute), 0.0)
    # Full recomputation of a block of the stage's layers: only those redo their forward.
    replayed = np.where(lay.recompute == 2, recomputed_layers(job, layers) / layers, 0.0)
    lt.recompute = np.where(lay.recompute == 2, lt.recompute * replayed, lt.recompute)
    recompute_mb = layers * lt.recompute
    pp_mb = _pp_exposed_s(ctx, compute_mb + tp_mb + ep_mb + recompute_mb)
    stage_mb = compute_mb + tp_mb + ep_mb + recompute_mb + pp_mb
    bubble = (lay.pp - 1) / lay.v * stage_mb
    stage_fwd = layers * (lt.fwd_compute + lt.fwd_tp + lt.ep) + logits_f
    stage_bwd = layers * (lt.bwd_compute + lt.bwd_tp + lt.ep + lt.recompute) + logits_b
    dp = _dp_exposed_s(ctx, lt, layers, m_count, stage_fwd, stage_bwd)
    optimizer = _optimizer_s(ctx)
    knob_compute = _knob_compute_s(ctx, m_count, layers)
    step = m_count * stage_mb + bubble + dp + optimizer + knob_compute
    mem = memory_gib_per_gpu(job, system, lay) + knob_memory_gib(job, lay, system.nccl_node_gpus)
    usable = usable_memory_gib(system.node.gpu, ctx.c)
    moe_fixed = np.broadcast_to(m_count * layers * lt.moe_fixed, np.shape(step)).astype(float)
    est = StepEstimate(step_time_s=step, compute_s=m_count * compute_mb - moe_fixed,
                       recompute_s=m_count * recompute_mb,
                       tp_comm_exposed_s=m_count * layers * (lt.fwd_tp + lt.bwd_tp),
                       cp_comm_exposed_s=m_count * layers * lt.cp, pp_comm_exposed_s=m_count * pp_mb,
                       dp_comm_exposed_s=dp, bubble_s=bubble, optimizer_s=optimizer, memory_gib_per_gpu=mem,
                       fits=mem <= usable, microbatches=m_count, ep_comm_exposed_s=m_count * ep_mb,
                       moe_fixed_s=moe_fixed, tp_replay_s=m_count * layers * replayed * lt.fwd_tp,
                       ep_replay_s=m_count * layers * replayed * lt.ep,
                       knob_compute_s=np.broadcast_to(knob_compute, np.shape(step)).astype(float))
    _add_rates(est, job, system, lay)
    return est


def _add_rates(est: StepEstimate, job: Job, system: System, lay: Layouts) -> None:
    gpus = lay.tp * lay.pp * lay.dp * lay.cp
    tokens = job.global_batch * job.seq_len
    flops = lora.training_flops_per_token(job.model, job.peft, job.seq_len) * tokens
    peak = mfu_peak(system.node.gpu, job.precision)
    # No step is faster than its model FLOPs at the dense peak of its number format: where the parts (a fused
    # kernel's share, a fitted constant) would sum to less, the step is held at that bound and says so.
    if peak.tflops > 0:
        bound = flops / gpus / (peak.tflops * 1e12)
        est.peak_bound = est.step_time_s < bound
        est.step_time_s = np.maximum(est.step_time_s, bound)
    else:
        est.peak_bound = np.zeros(np.shape(est.step_time_s), dtype=bool)
    est.tokens_per_s = tokens / est.step_time_s
    est.tflops_per_gpu = flops / est.step_time_s / gpus / 1e12
    # MFU against the dense peak of the format the GEMMs run at (model/ranges/mfu.py), named wherever it prints.
    est.mfu = peak.mfu(est.tflops_per_gpu)
