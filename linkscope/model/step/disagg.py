"""Disaggregated serving: prefill on one pool of GPUs, decode on another, each request's KV cache between them.

A request waits for a prefill instance, is prefilled there (`infer.batched_prefill_s`, prompts batched up to the
chunk a scheduler runs per step), its KV cache moves to a decode instance (`kv_transfer`), it waits for a decode
slot and the decode instance's next step gives its first token; then it decodes at the decode pool's speed with no
other user's prefill in its steps (`infer.estimate_inference` decode-only). So:

    TTFT = prefill queue + prefill + KV transfer (what shows after the prefill) + decode-slot queue + one step
    TPOT = the decode step at the decode batch

Throughput is rate matching, as TensorRT-LLM's disaggregated-serving study sizes its pools: each stage serves up
to a rate of requests (prefill instances x prompts per pass / pass time; KV links: prefill instances / the busiest
rank's transfer time; decode replicas x batch / (output tokens x TPOT)), the smallest bounds the deployment, and
tokens/s per GPU is that rate x output tokens over every GPU of both pools. Queues are M/D/c (`queueing`) at the
rate served: `--qps`, else a share of the smaller capacity of this plan and of colocated serving on the same GPUs
(data/kv.yaml `load_share`), so both answers see the same traffic.

Colocated serving beside it is `infer.estimate_inference` with chunked prefill on the same GPUs, as `predict
infer` prices it: TPOT carries other users' prefills; a prompt's prefill queues behind the instance's other prefills
(one at a time) and rides ceil(prompt / chunk) decode steps of the running batch.

Where the pools sit on the System decides the KV path: one scale-up domain for both (or each domain holding whole
instances of both in the same ratio) keeps it on NVLink; otherwise it crosses the network (RDMA where the fabric
has GPUDirect RDMA, else TCP). `scale_up_domain_gpus` is the one predicate that says how many GPUs a domain joins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.ranges.accuracy import rate_range, spread, time_range
from linkscope.model.step.compute import DEFAULT_ENGINE, compute_constants
from linkscope.model.step.infer import (InferEstimate, InferJob, batched_prefill_s, best_batch_for_budget,
                                        candidate_batches, estimate_inference, tp_options)
from linkscope.model.step.kv_transfer import (KvOptions, KvTransfer, check_options, kv_constants, link,
                                              price_transfer, scale_up_path, stages)
from linkscope.model.step.queueing import md_c_wait_s
from linkscope.model.step.transformer import ModelConfig

STAGES = ("prefill", "kv", "decode")


@dataclass(frozen=True)
class Pool:
    """GPUs of one role and how each instance of it is laid out."""

    gpus: int
    tp: int
    ep: int = 1
    """Decode only: experts over ep GPUs, attention in replicas of tp GPUs (model.step.infer.InferJob.ep)."""

    @property
    def group(self) -> int:
        """GPUs of one instance (an expert group under wide EP)."""
        return max(self.tp, self.ep)

    @property
    def instances(self) -> int:
        """Instances in the pool."""
        return self.gpus // self.group

    @property
    def replicas(self) -> int:
        """Attention replicas, each decoding its own batch."""
        return self.gpus // self.tp


@dataclass(frozen=True)
class DisaggJob:
    """A model served with prefill and decode on separate pools."""

    model: ModelConfig
    input_tokens: int
    output_tokens: int
    prefill: Pool
    decode: Pool
    precision: str = "bf16"
    kv_precision: str = "bf16"
    engine: str = DEFAULT_ENGINE
    kv: KvOptions = field(default_factory=KvOptions)

    @property
    def gpus(self) -> int:
        """Both pools."""
        return self.prefill.gpus + self.decode.gpus

    def infer_job(self, pool: Pool) -> InferJob:
        """One instance of `pool` as the serving model prices it."""
        return InferJob(self.model, pool.tp, 1, self.input_tokens, self.output_tokens, self.precision,
                        kv_precision=self.kv_precision, ep=pool.ep, engine=self.engine)


def scale_up_domain_gpus(system: System) -> int:
    """GPUs one scale-up domain joins (NVLink/xGMI, or a node's PCIe): the KV path stays inside it. A node, or an
    NVLink domain across nodes (the trays of a GB200/GB300 NVL72 rack)."""
    su = system.node.scale_up
    if system.domain_spans_nodes:
        return system.nvlink_domain_gpus
    if su.is_nvlink or su.kind == "xgmi-mesh":
        return max(1, min(su.domain_size, system.node.gpus))
    return system.node.gpus


def _shares_domain(job: DisaggJob, system: System) -> bool:
    """Every prefill instance can hand its KV cache to a decode instance in its own domain: both pools in one
    domain, or k domains each holding whole instances of both in the pools' ratio."""
    domain = scale_up_domain_gpus(system)
    p, d = job.prefill, job.decode
    # A System smaller than one domain (some trays of a rack) is one partial domain.
    for k in range(max(1, math.ceil(job.gpus / domain)), min(p.gpus, d.gpus, max(1, system.gpus // domain)) + 1):
        if p.gpus % k or d.gpus % k or (p.gpus // k) % p.group or (d.gpus // k) % d.group:
            continue
        if p.gpus // k + d.gpus // k <= domain:
            return True
    return False


@dataclass(frozen=True)
class Placement:
    """Where the pools sit and the path their KV cache takes."""

    path: str
    shared_domain: bool
    domain_gpus: int


def place(job: DisaggJob, system: System) -> Placement:
    """The pools on the System and the KV path (`job.kv.transport`, or where the pools sit for `auto`)."""
    if job.gpus > system.gpus:
        raise UserError(f"the prefill and decode pools ({job.prefill.gpus} + {job.decode.gpus} GPUs) are larger "
                        f"than {system.id}'s {system.gpus} GPUs; give --nodes", field="decode_gpus")
    shared = _shares_domain(job, system)
    domain = scale_up_domain_gpus(system)
    want = job.kv.transport
    network = system.node.scale_out
    if want == "nvlink":
        if scale_up_path(system) == "pcie":
            raise UserError(f"nvlink: {system.id} has no NVLink ({system.node.scale_up.kind}); use auto, rdma or "
                            "tcp", field="kv_transport")
        if not shared:
            raise UserError(f"nvlink: the prefill and decode pools ({job.prefill.gpus} + {job.decode.gpus} GPUs) do "
                            f"not share an NVLink domain on {system.id} (a domain is {domain} GPUs, one node); use "
                            "rdma or tcp", field="kv_transport")
        return Placement(scale_up_path(system), True, domain)
    if want == "rdma" and not network.is_rdma:
        raise UserError(f"rdma: {system.id}'s network ({network.fabric}) has no GPUDirect RDMA; use tcp",
                        field="kv_transport")
    if want == "auto":
        want = scale_up_path(system) if shared else "rdma" if network.is_rdma else "tcp"
    return Placement(want, shared and want == scale_up_path(system), domain)


def check_job(job: DisaggJob, system: System) -> None:
    """Pools that divide into their instances, TP inside a node or NVLink domain, a page size within the context
    (UserError)."""
    if job.prefill.ep > 1:
        raise UserError("wide expert parallelism is priced for decode only", field="decode_ep")
    for name, pool in (("prefill", job.prefill), ("decode", job.decode)):
        if pool.gpus < 1 or pool.tp < 1 or pool.ep < 1:
            raise UserError(f"must be at least 1 (got {pool.gpus} GPUs, tp {pool.tp}, ep {pool.ep})",
                            field=f"{name}_gpus")
        if pool.tp > system.max_nccl_node_gpus:
            raise UserError(f"{pool.tp} spans nodes; tensor parallelism stays inside a node (or NVLink domain) of "
                            f"{system.max_nccl_node_gpus} GPUs", field=f"{name}_tp")
        if pool.gpus % pool.group:
            what = f"ep {pool.ep}" if pool.ep > pool.tp else f"tp {pool.tp}"
            raise UserError(f"{what} does not divide the {name} pool of {pool.gpus} GPUs",
                            field=f"{name}_ep" if pool.ep > pool.tp else f"{name}_tp")
    check_options(job.kv, job.input_tokens + job.output_tokens)


def _pool_system(system: System, pool: Pool) -> System:
    return system.with_nodes(max(1, math.ceil(pool.group / system.node.gpus)))


@dataclass(frozen=True)
class Ttft:
    """Time to first token, piece by piece (seconds)."""

    prefill_queue_s: float
    prefill_s: float
    kv_transfer_s: float
    decode_queue_s: float
    first_step_s: float

    @property
    def total_s(self) -> float:
        """The sum: what a user waits for the first token."""
        return self.prefill_queue_s + self.prefill_s + self.kv_transfer_s + self.decode_queue_s + self.first_step_s

    def as_dict(self) -> dict[str, float]:
        """JSON-ready dict."""
        return {"prefill_queue_s": self.prefill_queue_s, "prefill_s": self.prefill_s,
                "kv_transfer_s": self.kv_transfer_s, "decode_queue_s": self.decode_queue_s,
                "first_decode_step_s": self.first_step_s, "ttft_s": self.total_s}


@dataclass(frozen=True)
class DisaggEstimate:
    """The disaggregated plan at one decode batch."""

    job: DisaggJob
    placement: Placement
    transfer: KvTransfer
    kv_exposed_s: float
    batch: int
    prefill_s: float
    """One prompt prefilled alone."""
    prefill_batch: int
    prefill_pass_s: float
    decode_step_s: float
    decode_memory_gib: float
    decode_fits: bool
    prefill_memory_gib: float
    prefill_fits: bool
    capacity_per_s: dict[str, float]
    """Requests/s each stage serves at most: prefill, kv, decode."""

    @property
    def tpot_s(self) -> float:
        """Time per output token: the decode step, no prefill inside it."""
        return self.decode_step_s

    @property
    def rate_per_s(self) -> float:
        """Requests/s the deployment serves: its slowest stage's."""
        return min(self.capacity_per_s.values())

    @property
    def bottleneck(self) -> str:
        """The stage that bounds the throughput."""
        return min(STAGES, key=lambda s: self.capacity_per_s[s])

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second over every GPU of both pools, at the bottleneck's rate."""
        return self.rate_per_s * self.job.output_tokens / self.job.gpus

    def utilisation(self, rate_per_s: float) -> dict[str, float]:
        """Each stage's busy share at `rate_per_s` requests/s."""
        return {s: rate_per_s / self.capacity_per_s[s] for s in STAGES}

    def ttft(self, rate_per_s: float) -> Ttft:
        """TTFT at `rate_per_s` requests/s (below the capacity)."""
        p, d = self.job.prefill, self.job.decode
        prefill_queue = md_c_wait_s(rate_per_s, p.instances, 1.0 / (self.capacity_per_s["prefill"] / p.instances))
        slot_s = self.job.output_tokens * self.tpot_s
        decode_queue = md_c_wait_s(rate_per_s, d.replicas * self.batch, slot_s)
        return Ttft(prefill_queue, self.prefill_s, self.kv_exposed_s, decode_queue, self.decode_step_s)


@dataclass(frozen=True)
class PrefillPrice:
    """One prefill instance: how many prompts a pass takes, the pass, one prompt alone, its memory."""

    prompts_per_pass: int
    pass_s: float
    prefill_s: float
    memory_gib: float
    fits: bool


@dataclass(frozen=True)
class DecodePrice:
    """One decode replica at one batch."""

    batch: int
    step_s: float
    memory_gib: float
    fits: bool


def prefill_price(job: DisaggJob, system: System, tiers: CommTiers) -> PrefillPrice:
    """A prefill instance of `job` (prompts shorter than the chunk a scheduler runs per step are batched up to
    it); depends only on the prefill TP, not on the pool's size."""
    pjob = job.infer_job(job.prefill)
    psys = _pool_system(system, job.prefill)
    k = max(1, compute_constants().prefill_chunk_tokens // job.input_tokens)
    est = estimate_inference(pjob, psys, np.asarray([float(k)]), tiers, prefill_interference=False)
    return PrefillPrice(k, batched_prefill_s(pjob, psys, k, tiers), batched_prefill_s(pjob, psys, 1, tiers),
                        float(est.memory_gib_per_gpu[0]), bool(est.fits[0]))


def decode_price(dec: InferEstimate, index: int) -> DecodePrice:
    """The decode replica at batch index `index` of its estimate."""
    return DecodePrice(int(dec.batch[index]), float(dec.decode_step_s[index]), float(dec.memory_gib_per_gpu[index]),
                       bool(dec.fits[index]))


def decode_estimate(job: DisaggJob, system: System, tiers: CommTiers, batch: int | None,
                    budget: float | None) -> tuple[InferEstimate, int | None]:
    """The decode pool's decode-only estimate and the batch index: the given batch, or the largest that fits and
    meets `budget` tokens/s per user (None when none does)."""
    djob = job.infer_job(job.decode)
    dsys = _pool_system(system, job.decode)
    if budget is None:
        return estimate_inference(djob, dsys, np.asarray([float(batch or 1)]), tiers, False), 0
    est = estimate_inference(djob, dsys, candidate_batches(djob, dsys), tiers, False)
    return est, best_batch_for_budget(est, budget)


def transfer_for(job: DisaggJob, system: System, tiers: CommTiers, placement: Placement) -> KvTransfer:
    """One request's KV transfer on the path the placement chose (the prefill pool's GPUs of a node sending
    at once)."""
    return price_transfer(job.model, job.kv_precision, job.input_tokens, job.prefill.tp, job.decode.tp,
                          link(system, tiers, placement.path, min(job.prefill.gpus, system.node.gpus)), job.kv)


def assemble(job: DisaggJob, placement: Placement, pre: PrefillPrice, dec: DecodePrice,
             transfer: KvTransfer) -> DisaggEstimate:
    """The plan from its parts' prices (cheap: a search prices the parts once and the pool sizes many times)."""
    capacity = {"prefill": job.prefill.instances * pre.prompts_per_pass / pre.pass_s,
                "kv": job.prefill.instances / transfer.busy_s,
                "decode": job.decode.replicas * dec.batch / (job.output_tokens * dec.step_s)}
    exposed = transfer.exposed_s(pre.prefill_s, stages(job.kv, job.model, job.input_tokens))
    return DisaggEstimate(job=job, placement=placement, transfer=transfer, kv_exposed_s=exposed, batch=dec.batch,
                          prefill_s=pre.prefill_s, prefill_batch=pre.prompts_per_pass, prefill_pass_s=pre.pass_s,
                          decode_step_s=dec.step_s, decode_memory_gib=dec.memory_gib, decode_fits=dec.fits,
                          prefill_memory_gib=pre.memory_gib, prefill_fits=pre.fits, capacity_per_s=capacity)


def estimate_disagg(job: DisaggJob, system: System, tiers: CommTiers, dec: InferEstimate, index: int,
                    placement: Placement | None = None) -> DisaggEstimate:
    """The plan with the decode pool at `dec`'s batch index `index`."""
    placement = placement or place(job, system)
    return assemble(job, placement, prefill_price(job, system, tiers), decode_price(dec, index),
                    transfer_for(job, system, tiers, placement))


@dataclass(frozen=True)
class ColocatedEstimate:
    """Prefill and decode on the same GPUs (chunked prefill), as `predict infer` prices them."""

    tp: int
    instances: int
    gpus: int
    output_tokens: int
    batch: int
    prefill_s: float
    decode_step_s: float
    tpot_s: float
    cycle_s: float
    chunks: int
    memory_gib: float
    fits: bool
    ep: int = 1
    """Experts over this many GPUs, attention in replicas of tp GPUs (each an instance here); 1: none."""

    @property
    def rate_per_s(self) -> float:
        """Requests/s the instances serve: each finishes its batch once a cycle."""
        return self.instances * self.batch / self.cycle_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second over the same GPUs (idle ones a TP does not fill included)."""
        return self.rate_per_s * self.output_tokens / self.gpus

    def ttft(self, rate_per_s: float) -> Ttft:
        """A prompt waits for a slot and behind its instance's other prefills, then is prefilled across
        `chunks` steps of the running batch."""
        stretched = self.prefill_s + self.chunks * self.decode_step_s
        slot = md_c_wait_s(rate_per_s, self.instances * self.batch, self.cycle_s)
        queue = md_c_wait_s(rate_per_s / self.instances, 1, stretched)
        return Ttft(queue, self.prefill_s, 0.0, slot, self.chunks * self.decode_step_s)


def colocated_of(job: InferJob, est: InferEstimate, index: int, gpus: int) -> ColocatedEstimate:
    """Colocated serving on `gpus` GPUs with replicas of `job` (tp x pp GPUs each; under wide EP, the attention
    replicas of its expert groups) at `est`'s batch index."""
    i = index
    return ColocatedEstimate(tp=job.tp, instances=max(1, gpus // (job.tp * job.pp)), gpus=gpus,
                             output_tokens=job.output_tokens, batch=int(est.batch[i]),
                             prefill_s=float(est.prefill_s[i]), decode_step_s=float(est.decode_step_s[i]),
                             tpot_s=float(est.tpot_s[i]), cycle_s=float(est.cycle_s[i]),
                             chunks=math.ceil(job.input_tokens / compute_constants().prefill_chunk_tokens),
                             memory_gib=float(est.memory_gib_per_gpu[i]), fits=bool(est.fits[i]), ep=job.ep)


def colocated(job: DisaggJob, system: System, tiers: CommTiers, batch: int | None,
              budget: float | None) -> ColocatedEstimate | None:
    """Colocated serving on the same GPUs: every TP inside a node that divides the model and, where the decode
    pool runs wide expert parallelism, the decode pool's own layout (the decode pool's alone when a batch is
    given), the most tokens/s per GPU at the budget; None when no layout meets it."""
    best: ColocatedEstimate | None = None
    for pool in _colocated_layouts(job, system, budget is None):
        ijob = job.infer_job(pool)
        isys = _pool_system(system, pool)
        batches = candidate_batches(ijob, isys) if budget is not None else np.asarray([float(batch or 1)])
        est = estimate_inference(ijob, isys, batches, tiers)
        i = best_batch_for_budget(est, budget) if budget is not None else 0
        if i is None:
            continue
        option = colocated_of(ijob, est, i, job.gpus)
        if best is None or option.tokens_per_s_per_gpu > best.tokens_per_s_per_gpu:
            best = option
    return best


def _colocated_layouts(job: DisaggJob, system: System, given_batch: bool) -> list[Pool]:
    """The instance layouts colocated serving is tried in: tensor parallelism inside a node, and an MoE decode
    pool's wide-EP layout (experts over its GPUs, attention replicas of its TP), which colocated serving can run
    on the same GPUs as well (TensorRT-LLM's aggregated baselines run attention DP with EP too)."""
    tps = [t for t in tp_options(job.model, system.node.gpus) if t <= job.gpus]
    wide = [Pool(job.decode.group, job.decode.tp, job.decode.ep)] \
        if job.decode.ep > 1 and job.decode.group <= job.gpus else []
    if given_batch:
        return wide or [Pool(t, t) for t in ([job.decode.tp] if job.decode.tp in tps else tps[-1:])]
    return [Pool(t, t) for t in tps] + wide


def served_rate(plan: DisaggEstimate, beside: ColocatedEstimate | None, qps: float | None) -> float:
    """The load both answers are priced at: `qps`, else `load_share` of the smaller capacity (UserError when
    `qps` is more than the plan serves)."""
    if qps is not None:
        if qps >= plan.rate_per_s:
            raise UserError(f"{qps:g} requests/s is more than the plan serves: {plan.rate_per_s:.3g} requests/s "
                            f"(the {plan.bottleneck} stage bounds it)", field="qps")
        return qps
    rates = [plan.rate_per_s] + ([beside.rate_per_s] if beside is not None else [])
    return kv_constants().load_share * min(rates)


def verdict(plan: DisaggEstimate, beside: ColocatedEstimate | None) -> dict[str, Any]:
    """Which serves more tokens/s per GPU on the same GPUs (at the same per-user speed when a budget chose the
    batches), and by how much."""
    if beside is None:
        return {"winner": "disaggregated", "speedup": None,
                "why": "no colocated layout on the same GPUs meets the budget"}
    ratio = plan.tokens_per_s_per_gpu / beside.tokens_per_s_per_gpu
    winner = "disaggregated" if ratio > 1.0 else "colocated"
    return {"winner": winner, "speedup": ratio,
            "why": f"disaggregated serves {ratio:.2f}x the tokens/s per GPU of colocated serving on the same GPUs"}


@dataclass(frozen=True)
class DisaggAnswer:
    """`predict infer --disaggregated`: the plan, colocated serving on the same GPUs, and the load priced."""

    plan: DisaggEstimate
    colocated: ColocatedEstimate | None
    rate_per_s: float
    """Requests/s both answers are priced at."""
    qps_given: bool


def predict_disagg(job: DisaggJob, system: System, tiers: CommTiers, batch: int | None = None,
                   budget: float | None = None, qps: float | None = None) -> DisaggAnswer:
    """The disaggregated plan (decode batch given, or the largest meeting `budget` tokens/s per user) beside
    colocated serving on the same GPUs, priced at `qps` or the default load."""
    check_job(job, system)
    placement = place(job, system)
    dec, index = decode_estimate(job, system, tiers, batch, budget)
    if index is None:
        raise UserError(f"no decode batch meets {budget:g} tokens/s per user on {system.id} with decode tp "
                        f"{job.decode.tp}: even one sequence gets {float(dec.tokens_per_s_per_user[0]):.1f}",
                        field="latency_budget")
    plan = estimate_disagg(job, system, tiers, dec, index, placement)
    beside = colocated(job, system, tiers, batch, budget)
    return DisaggAnswer(plan, beside, served_rate(plan, beside, qps), qps is not None)


def summary(answer: DisaggAnswer, system: System) -> dict[str, Any]:
    """The JSON of `predict infer --disaggregated`."""
    plan, job, rate = answer.plan, answer.plan.job, answer.rate_per_s
    out: dict[str, Any] = {
        "system": system.id, "model": job.model.id, "input_tokens": job.input_tokens,
        "output_tokens": job.output_tokens, "precision": job.precision, "kv_precision": job.kv_precision,
        "prefill": {"gpus": job.prefill.gpus, "tp": job.prefill.tp, "instances": job.prefill.instances,
                    "prompts_per_pass": plan.prefill_batch, "pass_s": plan.prefill_pass_s,
                    "memory_gib_per_gpu": plan.prefill_memory_gib, "fits": plan.prefill_fits},
        "decode": {"gpus": job.decode.gpus, "tp": job.decode.tp, "ep": job.decode.ep,
                   "replicas": job.decode.replicas, "batch": plan.batch,
                   "memory_gib_per_gpu": plan.decode_memory_gib, "fits": plan.decode_fits},
        "kv": {"transport": job.kv.transport, "path": plan.placement.path,
               "pools_share_domain": plan.placement.shared_domain, "block_tokens": job.kv.block,
               "granularity": job.kv.granularity, "overlap": job.kv.overlap,
               "stages": stages(job.kv, job.model, job.input_tokens), "exposed_s": plan.kv_exposed_s,
               **plan.transfer.as_dict()},
        "requests_per_s": rate, "load_from": "qps" if answer.qps_given else "load_share",
        "load_share": kv_constants().load_share,
        "capacity_requests_per_s": plan.capacity_per_s, "utilisation": plan.utilisation(rate),
        "bottleneck": plan.bottleneck, **plan.ttft(rate).as_dict(), "tpot_s": plan.tpot_s,
        "tokens_per_s_per_user": 1.0 / plan.tpot_s, "tokens_per_s_per_gpu": plan.tokens_per_s_per_gpu,
        "colocated": _colocated_dict(answer.colocated, rate), "verdict": verdict(plan, answer.colocated),
    }
    return {**out, **_ranges(out, system)}


def _ranges(out: dict[str, Any], system: System) -> dict[str, Any]:
    """p10..p90 ranges: decode and throughput from the serving evidence, the KV transfer from the disaggregated
    evidence (`model.ranges`), each saying what it rests on."""
    serving, kv = spread("inference", system), spread("disaggregated", system)
    return {"tpot_s_range": list(time_range(out["tpot_s"], "inference", system)),
            "tokens_per_s_per_gpu_range": list(rate_range(out["tokens_per_s_per_gpu"], "inference", system)),
            "kv_transfer_s_range": list(time_range(out["kv_transfer_s"], "disaggregated", system)),
            "range_basis": f"{serving.basis}; KV transfer: {kv.basis}",
            "range_note": "; ".join(n for n in (serving.note, kv.note and f"KV transfer: {kv.note}") if n) or None}


def _colocated_dict(beside: ColocatedEstimate | None, rate: float) -> dict[str, Any] | None:
    if beside is None:
        return None
    served = rate < beside.rate_per_s
    return {"tp": beside.tp, "ep": beside.ep, "instances": beside.instances, "batch": beside.batch,
            "ttft_s": beside.ttft(rate).total_s if served else None, "prefill_s": beside.prefill_s,
            "tpot_s": beside.tpot_s, "tokens_per_s_per_user": 1.0 / beside.tpot_s,
            "tokens_per_s_per_gpu": beside.tokens_per_s_per_gpu, "capacity_requests_per_s": beside.rate_per_s,
            "utilisation": rate / beside.rate_per_s, "memory_gib_per_gpu": beside.memory_gib, "fits": beside.fits}


def speedup_at(job: DisaggJob, system: System, tiers: CommTiers, budget: float,
               rate_matched: bool = False) -> float | None:
    """The plan's tokens/s per GPU over colocated serving's on the same GPUs, both at `budget` tokens/s per user;
    None where either cannot meet it. `rate_matched`: the prefill pool sized to the decode pool's rate exactly
    (fractional instances, no queueing headroom), as TensorRT-LLM's disaggregated-serving study plots its
    "rate-matched" curves: output tokens/s over (prefill GPUs x decode rate / prefill rate + decode GPUs)."""
    dec, index = decode_estimate(job, system, tiers, None, budget)
    beside = colocated(job, system, tiers, None, budget)
    if index is None or beside is None:
        return None
    plan = estimate_disagg(job, system, tiers, dec, index)
    if not rate_matched:
        return plan.tokens_per_s_per_gpu / beside.tokens_per_s_per_gpu
    decode = plan.capacity_per_s["decode"]
    prefill = min(plan.capacity_per_s["prefill"], plan.capacity_per_s["kv"])
    per_gpu = decode * job.output_tokens / (job.prefill.gpus * decode / prefill + job.decode.gpus)
    return per_gpu / beside.tokens_per_s_per_gpu
