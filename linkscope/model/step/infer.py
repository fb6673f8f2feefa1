"""Inference: prefill time, per-token decode time and serving throughput, vectorized over batch sizes.

Serving is modelled as a steady cycle: each of the B sequences in flight is prefilled once (I tokens) and
then decoded for O tokens, so one cycle is B prefills plus O decode steps of the whole batch. The scheduler
chunks prefills into the decode steps (TensorRT-LLM's in-flight batching, vLLM's chunked prefill): the
prompts' GEMMs share the steps' weight reads, while their attention and all-reduces run on their own.
The time per output token (TPOT) is the cycle over O: the decode step plus the share of other users'
prefills it carries, which is what inter-token latency measures under continuous batching. A user's speed has
one meaning, the one serving benchmarks measure and latency budgets are stated in: output tokens over the time
from first to last token, i.e. 1/TPOT. The budget search and a GPU's throughput (which counts the prefills
too) follow from the same cycle. Decode-only speed (one token per decode step, no other users' prefills) is
asked for explicitly (`prefill_interference=False`) and then holds for every figure.

Every GEMM streams its weights while it computes (a roofline per kernel): a decode step's GEMMs take the
longer of one read of the weights they use (not the input embedding, whose lookup reads one row per token), at
the measured share of HBM bandwidth a decode GEMM reaches (`decode_hbm`), and
their compute over the batch (the compute floor of a large batch); attention then reads the KV cache.
Prefill is GEMM-bound over the tokens in flight unless one weight read takes longer (a short prompt). GEMMs
run at the serving share of the generation's peak (`infer_gemm_max`). Every forward pass also pays its
small kernels under CUDA-graph replay (the norms, rotary embedding, KV-cache write, attention and
activation of each layer at `decode_kernel_us` each), on an engine that runs its host loop between GPU steps
(`engine` serial) the host time of every sequence in the step (`decode_seq_host_us`), and two tensor-parallel
all-reduces per layer priced by the collective model at
their small sizes; prefill's carry every prompt token's hidden state (seed 001: ~20 GB per GPU for an 8K
prompt on 70B).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.ranges.accuracy import rate_range, spread, time_range
from linkscope.model.comm.collectives import collective_time
from linkscope.model.comm.moe import MoeRequest, moe_path, predict_moe, runnable_kernel
from linkscope.model.comm.params import CommFit, comm_fit
from linkscope.model.ranges.records import above_record_flag
from linkscope.model.ranges.mfu import mfu_peak
from linkscope.model.step.compute import (DEFAULT_ENGINE, ENGINES, compute_constants, gemm_time_s, peak_tflops,
                                         usable_memory_gib)
from linkscope.model.step.layout import group_span
from linkscope.model.step.search import divisors
from linkscope.model.comm.tiers import CommTiers, check_multi_node, comm_tiers
from linkscope.model.step.transformer import ModelConfig

BYTES_PER_WEIGHT = {"bf16": 2, "fp16": 2, "fp8": 1}
MAX_INFER_BATCH = 4096
"""Largest batch tried against a latency budget (`predict infer`, `advise infer`)."""


@dataclass(frozen=True)
class InferJob:
    """One serving setup: model, layout, prompt and answer lengths, number format."""

    model: ModelConfig
    tp: int
    pp: int
    input_tokens: int
    output_tokens: int
    precision: str = "bf16"
    kv_precision: str = "bf16"
    """Format of the KV cache (fp8 halves its memory and the bytes each decode step reads)."""
    ep: int = 1
    """Wide expert parallelism (MoE models): the routed experts spread over ep GPUs, attention data-parallel with
    one replica per tp x pp GPUs of them, each replica decoding its own batch; 1 splits experts by tp like the rest."""
    engine: str = DEFAULT_ENGINE
    """The serving engine's host loop (compute.ENGINES): whether its host work per sequence is on the critical
    path."""
    moe_transport: str = "auto"
    """How wide EP's dispatch and combine reach other GPUs (model/comm/moe.py TRANSPORT_CHOICES)."""

    @property
    def replicas(self) -> int:
        """Attention replicas sharing one expert-parallel group."""
        return max(1, self.ep // (self.tp * self.pp))


@dataclass
class InferEstimate:
    """Arrays over batch sizes."""

    batch: np.ndarray
    prefill_s: np.ndarray
    """One sequence's prefill."""
    decode_step_s: np.ndarray
    """One decode step of the whole batch (every sequence gains a token)."""
    tp_comm_prefill_s: np.ndarray
    tp_comm_decode_s: np.ndarray
    cycle_s: np.ndarray
    tpot_s: np.ndarray
    """Time per output token as each user sees it: the cycle over O (the decode step alone when decode-only)."""
    tokens_per_s_per_user: np.ndarray
    """1 / tpot_s: output tokens over the time from first to last token."""
    tokens_per_s_per_gpu: np.ndarray
    memory_gib_per_gpu: np.ndarray
    fits: np.ndarray
    ep_a2a_decode_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Wide EP's dispatch and combine in one decode step (all MoE layers)."""
    prefill_interference: bool = True
    """False: decode-only figures (no other users' prefills in the cycle)."""


SMALL_SIZES = 8
"""Size vectors up to this length are memoized: the fitting procedure prices each evidence entry under
hundreds of compute constants, and the collectives do not depend on them (only on the tiers, the layout and
the collective model's own fitted constants, which the key carries)."""


def _allreduce_s(tiers: CommTiers, size: np.ndarray, job: InferJob, gpus_per_node: int) -> np.ndarray:
    size = np.asarray(size, dtype=float)
    if size.size <= SMALL_SIZES:
        return np.asarray(_allreduce_small_s(tiers, tuple(size.ravel().tolist()), job.tp, gpus_per_node,
                                             comm_fit())).reshape(size.shape)
    return _allreduce_vector_s(tiers, size, job.tp, gpus_per_node)


@functools.lru_cache(maxsize=4096)
def _allreduce_small_s(tiers: CommTiers, sizes: tuple[float, ...], tp: int, gpus_per_node: int,
                       fit: CommFit) -> tuple[float, ...]:
    # fit is only part of the key: collective_time reads the fit in force itself.
    return tuple(_allreduce_vector_s(tiers, np.asarray(sizes), tp, gpus_per_node).tolist())


def _allreduce_vector_s(tiers: CommTiers, size: np.ndarray, tp: int, gpus_per_node: int) -> np.ndarray:
    ranks = np.full_like(size, tp, dtype=float)
    _, nodes = group_span(ranks, np.ones_like(ranks), gpus_per_node)
    time_us = collective_time("all_reduce", tiers, size, ranks, nodes, labels=False).time_us
    return np.where(tp > 1, time_us * 1e-6, 0.0)


def _kv_bytes_per_token(job: InferJob) -> float:
    """KV cache of one token on one GPU (KV heads are replicated when tp exceeds them)."""
    m = job.model
    kv_split = min(job.tp, m.kv_heads)
    return 2.0 * m.kv_dim / kv_split * BYTES_PER_WEIGHT[job.kv_precision] * m.layers / job.pp


def kv_cache_bytes_per_token(model: ModelConfig, kv_precision: str) -> float:
    """KV cache of one token for the whole model (every layer, every KV head): what a disaggregated deployment
    moves from its prefill pool to its decode pool per prompt token."""
    return _kv_bytes_per_token(InferJob(model, 1, 1, 1, 1, kv_precision=kv_precision))


def _expert_bytes_per_gpu(job: InferJob) -> float:
    """Routed expert weights one GPU holds: split over ep GPUs, or by tp x pp without expert parallelism."""
    m = job.model
    experts = m.moe_layers * m.expert_layer_params() * BYTES_PER_WEIGHT[job.precision]
    return experts / (job.ep if job.ep > 1 else job.tp * job.pp)


def _weights_bytes_per_gpu(job: InferJob) -> float:
    m = job.model
    experts = m.moe_layers * m.expert_layer_params() * BYTES_PER_WEIGHT[job.precision]
    return (m.total_params() * BYTES_PER_WEIGHT[job.precision] - experts) / (job.tp * job.pp) \
        + _expert_bytes_per_gpu(job)


def _experts_touched_share(m: ModelConfig, tokens: np.ndarray | float) -> np.ndarray:
    """Expected share of an MoE layer's routed experts that `tokens` tokens reach, each routed to topk of them
    uniformly: 1 - (1 - topk/experts)^tokens. One decode token reads topk experts; a batch of 64 on a 256-expert
    top-8 model already reads 87% of them."""
    return 1.0 - (1.0 - m.topk / m.experts) ** np.asarray(tokens, dtype=float)


def _weights_touched_bytes_per_gpu(job: InferJob, tokens: np.ndarray | float) -> np.ndarray:
    """Weights a forward pass over `tokens` tokens reads on one GPU: all but the input embedding (its lookup
    reads one row per token) and the routed experts the tokens do not reach."""
    m = job.model
    lookup = m.embedding_params() * BYTES_PER_WEIGHT[job.precision] / (job.tp * job.pp)
    all_weights = np.full(np.shape(tokens), _weights_bytes_per_gpu(job) - lookup)
    if not m.is_moe:
        return all_weights
    # Under wide EP every replica's tokens reach the same experts: the group's tokens decide what is read.
    group_tokens = np.asarray(tokens, dtype=float) * job.replicas
    return all_weights - _expert_bytes_per_gpu(job) * (1.0 - _experts_touched_share(m, group_tokens))


def _layer_gemms(m: ModelConfig) -> tuple[float, ...]:
    """Weights of each GEMM of one layer (QKV, output, FFN matrices), before the TP split; for an MoE model
    the MLP weights a token's GEMMs use (its topk routed and the shared experts), averaged over layers."""
    attention = (m.hidden * (m.q_dim + 2 * m.kv_dim), m.q_dim * m.hidden)
    return (*attention, *([m.hidden * m.mean_ffn_width()] * m.ffn_matrices))


def _gemms_s(job: InferJob, system: System, tokens: np.ndarray) -> np.ndarray:
    """All layers' GEMMs over `tokens` tokens in flight, per GPU, at the serving share of peak."""
    m, c, gpu = job.model, compute_constants(), system.node.gpu
    peak, top = peak_tflops(gpu, job.precision), c.infer_gemm_max(gpu.arch, job.precision)
    per_layer = np.zeros_like(tokens, dtype=float)
    for w in _layer_gemms(m):
        per_layer = per_layer + gemm_time_s(2.0 * tokens * w / job.tp, peak, c, top)
    return per_layer * m.layers


def _weights_read_s(job: InferJob, system: System, tokens: np.ndarray | float) -> np.ndarray:
    """One read of every pp stage's weights that `tokens` tokens touch, one stage after another, at the decode
    share of HBM."""
    bw = system.node.gpu.hbm_gb_per_s * 1e9 * compute_constants().decode_hbm(system.node.gpu.vendor)
    return _weights_touched_bytes_per_gpu(job, tokens) * job.pp / bw


def _ep_a2a_s(job: InferJob, tiers: CommTiers, gpus_per_node: int, tokens_per_replica: np.ndarray,
              kernel: str) -> np.ndarray:
    """Dispatch plus combine of every MoE layer (all stages, one after another) for the tokens a replica holds,
    each of its tp ranks sending its share; zero without wide expert parallelism."""
    m = job.model
    tokens = np.atleast_1d(np.asarray(tokens_per_replica, dtype=float))
    if job.ep <= 1 or not m.is_moe:
        return np.zeros_like(tokens)
    precision = "fp8" if job.precision == "fp8" else "bf16"

    per_node = min(job.ep, gpus_per_node)
    runs = runnable_kernel(tiers, kernel, job.moe_transport, -(-job.ep // per_node))

    def layer_s(per_rank: int) -> float:
        req = MoeRequest(ep=job.ep, tokens_per_rank=per_rank, hidden=m.hidden, topk=m.topk, experts=m.experts,
                         precision=precision, kernel=runs, transport=job.moe_transport)
        p = predict_moe(tiers, req, per_node=per_node)
        return (p.dispatch_us + p.combine_us) * 1e-6

    # The MoE model is a fixed cost plus a time proportional to the tokens (every term scales with them), so two
    # points give it at every batch size exactly.
    one, many = layer_s(1), layer_s(LINEAR_PROBE_TOKENS)
    slope = (many - one) / (LINEAR_PROBE_TOKENS - 1)
    per_rank = np.maximum(tokens / job.tp, 1.0)
    return (one + slope * (per_rank - 1.0)) * m.moe_layers


LINEAR_PROBE_TOKENS = 1024


def _forward_fixed_s(job: InferJob) -> float:
    """Kernel launches of every layer (all stages run in turn): one forward pass."""
    return compute_constants().forward_fixed_us(job.model.layers) * 1e-6


def _host_s(job: InferJob, sequences: np.ndarray | float) -> np.ndarray:
    """Host time a step over `sequences` sequences adds: per sequence under a serial engine, none when the
    engine overlaps it with the GPU."""
    per_sequence_s = compute_constants().decode_seq_host_us * 1e-6 if job.engine == "serial" else 0.0
    return np.asarray(sequences, dtype=float) * per_sequence_s


@dataclass(frozen=True)
class _Prefill:
    total_s: float
    comm_s: float
    gemm_s: float
    """The GEMMs alone: what rides in decode steps' weight reads under chunked prefill."""
    serial_s: float
    """Attention, logits and TP comm: kernels of their own that no decode step hides."""


def _prefill(job: InferJob, system: System, tiers: CommTiers, sequences: int = 1) -> _Prefill:
    """Prefill of `sequences` prompts of input_tokens each, batched in one pass."""
    m, c, gpu = job.model, compute_constants(), system.node.gpu
    peak = peak_tflops(gpu, job.precision)
    tokens = float(job.input_tokens * sequences)
    gemm = float(_gemms_s(job, system, np.asarray([tokens]))[0])
    attention = sequences * 0.5 * 4.0 * job.input_tokens ** 2 * m.hidden / job.tp * m.layers / (
        peak_tflops(gpu, "bf16") * 1e12 * c.flash_attention_efficiency)
    logits = float(gemm_time_s(np.asarray(2.0 * m.hidden * m.vocab * sequences / job.tp), peak, c,
                               c.infer_gemm_max(gpu.arch, job.precision)))
    comm = 2 * m.layers * _allreduce_s(tiers, np.asarray([tokens * m.hidden * 2.0]), job, system.max_nccl_node_gpus)[0]
    a2a = float(_ep_a2a_s(job, tiers, system.max_nccl_node_gpus, np.asarray([tokens]), "normal")[0])
    serial = float(attention + logits + comm + a2a)
    # A short prompt cannot beat one read of the weights, however few FLOPs it has.
    total = (max(gemm, float(_weights_read_s(job, system, tokens))) + serial + _forward_fixed_s(job)
             + float(_host_s(job, sequences)))
    return _Prefill(total_s=float(total), comm_s=float(comm), gemm_s=gemm, serial_s=serial)


@dataclass(frozen=True)
class _Decode:
    gemm_s: np.ndarray
    """The batch's GEMMs (and logits)."""
    kv_s: np.ndarray
    """Attention reading the KV cache: its own kernel, after the GEMMs, not hidden by them."""
    fixed_s: np.ndarray
    """Kernel launches, host time per step and TP all-reduces."""
    comm_s: np.ndarray
    a2a_s: np.ndarray
    """Wide EP's dispatch and combine (all MoE layers)."""
    batch: np.ndarray
    """Tokens a step decodes (one per sequence): how many of an MoE model's experts its weight read touches."""


def _decode(job: InferJob, system: System, tiers: CommTiers, batch: np.ndarray) -> _Decode:
    m, c, gpu = job.model, compute_constants(), system.node.gpu
    context = job.input_tokens + job.output_tokens / 2.0
    # Every stage runs in turn for one token, so a step reads all pp stages' weights and KV, one after another.
    kv = batch * context * _kv_bytes_per_token(job) * job.pp / (gpu.hbm_gb_per_s * 1e9 * c.decode_hbm(gpu.vendor))
    logits = gemm_time_s(2.0 * m.hidden * m.vocab * batch / job.tp, peak_tflops(gpu, job.precision), c,
                         c.infer_gemm_max(gpu.arch, job.precision))
    gemm = _gemms_s(job, system, batch) + logits  # all layers: the stages run one after another
    comm = 2 * m.layers * _allreduce_s(tiers, batch * m.hidden * 2.0, job, system.max_nccl_node_gpus)
    a2a = _ep_a2a_s(job, tiers, system.max_nccl_node_gpus, batch, "low-latency")
    fixed = _forward_fixed_s(job) + _host_s(job, batch) + comm + a2a
    return _Decode(gemm_s=gemm, kv_s=kv, fixed_s=fixed, comm_s=comm, a2a_s=a2a,
                   batch=np.asarray(batch, dtype=float))


def _step_s(job: InferJob, system: System, d: _Decode, extra_gemm_s: np.ndarray | float = 0.0) -> np.ndarray:
    """One decode step: each GEMM streams its weights while it computes (a roofline per kernel), so the
    GEMMs take the longer of one weight read and their compute; attention's KV read and the fixed costs
    follow. `extra_gemm_s`: prefill GEMMs riding in the same step (chunked prefill)."""
    return np.maximum(_weights_read_s(job, system, d.batch), d.gemm_s + extra_gemm_s) + d.kv_s + d.fixed_s


def prefill_chunk_steps(job: InferJob, batch: np.ndarray) -> np.ndarray:
    """Decode steps of one cycle that carry a prefill chunk: each of the B prompts enters in chunks of at most
    `prefill_chunk_tokens` (the scheduler's token budget per step), one chunk per step, at most one per decode
    step. A chunk's GEMMs hide only the weight read of the step they ride in, so a long prompt cut into a few
    large chunks hides a few reads, not one per decode step of the cycle."""
    chunks = max(1, -(-job.input_tokens // compute_constants().prefill_chunk_tokens))  # an empty prompt: one step
    return np.minimum(float(job.output_tokens), np.asarray(batch, dtype=float) * chunks)


def _memory_gib(job: InferJob, batch: np.ndarray) -> np.ndarray:
    """Weights plus the KV cache of `batch` sequences, per GPU."""
    return (_weights_bytes_per_gpu(job) + batch * (job.input_tokens + job.output_tokens)
            * _kv_bytes_per_token(job)) / 2**30


def candidate_batches(job: InferJob, system: System) -> np.ndarray:
    """Batch sizes to try against a latency budget: 1 up to the largest that fits (at most MAX_INFER_BATCH).

    A batch that does not fit is never chosen, so pricing it would only cost time (advise prices every
    offering); batch 1 stays even when it does not fit, to say how far off it is.
    """
    batches = np.arange(1, MAX_INFER_BATCH + 1, dtype=float)
    fitting = np.flatnonzero(_memory_gib(job, batches) <= usable_memory_gib(system.node.gpu))
    return batches[: int(fitting[-1]) + 1 if fitting.size else 1]


def estimate_inference(job: InferJob, system: System, batches: np.ndarray,
                       tiers: CommTiers | None = None, prefill_interference: bool = True) -> InferEstimate:
    """Prefill, decode and throughput for each batch size; `tiers` as resolved for the System (calibrated ones
    for a profile), modelled when not given. `prefill_interference` False: decode-only speed and throughput."""
    if job.tp * job.pp > system.gpus:
        raise UserError(f"tp x pp = {job.tp * job.pp} exceeds the {system.gpus} GPUs of {system.id}")
    if job.model.heads % job.tp:
        raise UserError(f"{job.tp} does not divide the {job.model.heads} attention heads of {job.model.id}", field="tp")
    _check_ep(job, system)
    if job.engine not in ENGINES:
        raise UserError(f"unknown engine '{job.engine}' (one of {', '.join(ENGINES)})", field="engine")
    tiers = tiers or comm_tiers(system)
    check_multi_node(tiers, -(-max(job.tp * job.pp, job.ep) // system.max_nccl_node_gpus))
    batch = np.asarray(batches, dtype=float)
    pre = _prefill(job, system, tiers)
    dec = _decode(job, system, tiers, batch)
    step = _step_s(job, system, dec)
    # Continuous batching with chunked prefill: the B prompts of a cycle ride in its decode steps a chunk at a
    # time, each chunk's GEMMs sharing that step's weight read; their attention and all-reduces run on their own.
    out = job.output_tokens
    if prefill_interference:
        chunk_steps = prefill_chunk_steps(job, batch)
        cycle = ((out - chunk_steps) * step + chunk_steps * _step_s(job, system, dec, batch * pre.gemm_s / chunk_steps)
                 + batch * pre.serial_s)
    else:
        cycle = out * step
    tpot = cycle / out
    memory = _memory_gib(job, batch)
    usable = usable_memory_gib(system.node.gpu)
    gpus = job.tp * job.pp
    return InferEstimate(batch=batch, prefill_s=np.full_like(batch, pre.total_s), decode_step_s=step,
                         tp_comm_prefill_s=np.full_like(batch, pre.comm_s), tp_comm_decode_s=dec.comm_s,
                         cycle_s=cycle, tpot_s=tpot, tokens_per_s_per_user=1.0 / tpot,
                         tokens_per_s_per_gpu=batch * out / cycle / gpus,
                         memory_gib_per_gpu=memory, fits=memory <= usable, ep_a2a_decode_s=dec.a2a_s,
                         prefill_interference=prefill_interference)


def _check_ep(job: InferJob, system: System) -> None:
    """--ep: an MoE model, dividing its experts, a multiple of tp x pp, within the System's GPUs."""
    m = job.model
    if job.ep < 1:
        raise UserError(f"must be at least 1 (got {job.ep})", field="ep")
    if job.ep == 1:
        return
    if not m.is_moe:
        raise UserError(f"{m.id} has no experts (a dense model); expert parallelism needs an MoE model", field="ep")
    if m.experts % job.ep:
        raise UserError(f"{job.ep} does not divide the {m.experts} experts of {m.id}", field="ep")
    if job.ep % (job.tp * job.pp):
        raise UserError(f"{job.ep} is not a multiple of tp x pp = {job.tp * job.pp} (each attention replica's "
                        f"GPUs)", field="ep")
    if job.ep > system.gpus:
        raise UserError(f"{job.ep} exceeds the {system.gpus} GPUs of {system.id}; give --nodes", field="ep")


def check_experts_fit(job: InferJob, system: System) -> None:
    """Under --ep, a UserError naming --ep when one sequence's weights and KV cache do not fit a GPU."""
    if job.ep <= 1:
        return
    need = float(_memory_gib(job, np.asarray([1.0]))[0])
    usable = usable_memory_gib(system.node.gpu)
    if need > usable:
        raise UserError(f"the experts of {job.model.id} do not fit at ep {job.ep}: {need:.1f} GiB per GPU for one "
                        f"sequence, {usable:g} usable on a {system.node.gpu.id}; raise ep", field="ep")


def batched_prefill_s(job: InferJob, system: System, sequences: int, tiers: CommTiers | None = None) -> float:
    """Prefill of `sequences` prompts submitted together and run as one pass (a fixed batch's first token)."""
    return _prefill(job, system, tiers or comm_tiers(system), sequences).total_s


def best_batch_for_budget(est: InferEstimate, budget_tokens_per_s_per_user: float) -> int | None:
    """Index of the largest batch that fits and still gives each user the budgeted tokens/s."""
    ok = est.fits & (est.tokens_per_s_per_user >= budget_tokens_per_s_per_user)
    if not np.any(ok):
        return None
    return int(np.flatnonzero(ok)[-1])


def summary(job: InferJob, system: System, est: InferEstimate, i: int) -> dict[str, Any]:
    """The JSON of `predict infer` for batch index i. `ttft_s` is one prompt's prefill on its own (no queueing);
    `tokens_per_s_per_user` x `tpot_s` = 1 whether or not other users' prefills are counted."""
    step = float(est.decode_step_s[i])
    per_token_s = float(est.tpot_s[i])
    per_gpu = float(est.tokens_per_s_per_gpu[i])
    # Under wide EP the expert group, not one attention replica, sets the nodes the serving spans.
    span = max(job.tp * job.pp, job.ep)
    nodes, trays = -(-span // system.max_nccl_node_gpus), -(-span // system.node.gpus)
    features: dict[str, Any] = {"precision": job.precision, "framework": job.engine, "gpus": job.tp * job.pp}
    evidence = spread("inference", system, nodes, trays, **features)
    return {
        "system": system.id, "model": job.model.id, "tp": job.tp, "pp": job.pp, "ep": job.ep, "engine": job.engine,
        "batch": int(est.batch[i]),
        "input_tokens": job.input_tokens, "output_tokens": job.output_tokens, "precision": job.precision,
        "prefill_interference": est.prefill_interference,
        "prefill_s": float(est.prefill_s[i]), "ttft_s": float(est.prefill_s[i]), "decode_step_s": step,
        "tpot_s": per_token_s, "time_per_output_token_s": per_token_s,
        "time_per_output_token_s_range": list(time_range(per_token_s, "inference", system, nodes, trays, **features)),
        "tokens_per_s_per_user": float(est.tokens_per_s_per_user[i]),
        "tokens_per_s_per_user_range": list(rate_range(float(est.tokens_per_s_per_user[i]), "inference", system,
                                                       nodes, trays, **features)),
        "tokens_per_s_per_gpu": per_gpu,
        "tokens_per_s_per_gpu_range": list(rate_range(per_gpu, "inference", system, nodes, trays, **features)),
        "range_basis": evidence.basis, "range_evidence": evidence.evidence, "range_note": evidence.note,
        "tp_allreduce_share_prefill": float(est.tp_comm_prefill_s[i] / est.prefill_s[i]),
        "tp_allreduce_share_decode": float(est.tp_comm_decode_s[i] / step),
        "ep_all_to_all_share_decode": float(est.ep_a2a_decode_s[i] / step) if len(est.ep_a2a_decode_s) else 0.0,
        "memory_gib_per_gpu": float(est.memory_gib_per_gpu[i]), "fits": bool(est.fits[i]),
        **_moe_path(job, system),
        **_serving_mfu(job, system, per_gpu),
    }


def _moe_path(job: InferJob, system: System) -> dict[str, str]:
    """Wide EP's decode kernel and the transport it runs on, with why (empty without wide EP)."""
    if job.ep <= 1 or not job.model.is_moe:
        return {}
    per_node = min(job.ep, system.max_nccl_node_gpus)
    kernel, transport, why = moe_path(comm_tiers(system), "low-latency", job.moe_transport, -(-job.ep // per_node))
    return {"moe_kernel": kernel, "moe_transport": transport, "moe_transport_reason": why}


def serving_tflops_per_gpu(model: ModelConfig, output_tokens_per_s_per_gpu: float) -> float:
    """Model TFLOP/s per GPU of serving: each output token runs 2 FLOPs per weight its matmuls use (serving MFU's
    numerator; prompt tokens are not counted)."""
    return output_tokens_per_s_per_gpu * 2.0 * model.active_params() / 1e12


def _serving_mfu(job: InferJob, system: System, tokens_per_s_per_gpu: float) -> dict[str, Any]:
    """Serving MFU (serving_tflops_per_gpu: output tokens x 2 x active weights over the dense peak of the
    format), its peak, and a flag where it is above every serving run the evidence set records on the GPU
    family in that format."""
    peak = mfu_peak(system.node.gpu, job.precision)
    mfu = float(peak.mfu(serving_tflops_per_gpu(job.model, tokens_per_s_per_gpu)))
    flag = above_record_flag("serving", mfu, peak) if peak.tflops > 0 else None
    return {"serving_mfu": mfu, **peak.as_dict(), "flags": [flag] if flag else []}


def tp_options(model: ModelConfig, gpus_per_node: int) -> list[int]:
    """Tensor-parallel sizes that stay inside one node (or NVLink domain, `System.max_nccl_node_gpus`) and split
    the model's query and KV heads evenly."""
    return [t for t in divisors(gpus_per_node)
            if model.heads % t == 0 and (model.kv_heads % t == 0 or t % model.kv_heads == 0)]


@dataclass(frozen=True)
class InferPick:
    """The layout and batch `predict infer` reports: the job, its estimate and the batch index chosen."""

    job: InferJob
    est: InferEstimate
    index: int | None


def _pick_index(est: InferEstimate, budget: float | None) -> int | None:
    return best_batch_for_budget(est, budget) if budget is not None else 0


def pick_tp(job: InferJob, system: System, batches: np.ndarray | None, budget: float | None,
            tiers: CommTiers | None = None, prefill_interference: bool = True) -> InferPick:
    """`--tp auto`: of the TP sizes inside a node, the one with the most tokens/s per GPU that fits (and meets
    the per-user budget when one is given); if none does, the widest, which needs the least memory per GPU.
    `batches` None: each TP's `candidate_batches`."""
    picks = []
    for tp in tp_options(job.model, system.max_nccl_node_gpus):
        sized = replace(job, tp=tp)
        est = estimate_inference(sized, system, candidate_batches(sized, system) if batches is None else batches,
                                 tiers, prefill_interference)
        picks.append(InferPick(sized, est, _pick_index(est, budget)))
    if not picks:
        raise UserError(f"--tp auto: no TP size inside {system.max_nccl_node_gpus} GPUs divides {job.model.id}'s "
                        f"{job.model.heads} heads")
    good = [p for p in picks if p.index is not None and bool(p.est.fits[p.index])]
    if not good:
        return picks[-1]
    return max(good, key=lambda p: float(p.est.tokens_per_s_per_gpu[p.index or 0]))
