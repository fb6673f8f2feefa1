"""The model's prediction for one evidence entry, in the entry's own metric."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from linkscope.hardware.loader import HardwareDB, load_system_file
from linkscope.hardware.resolve import resolve_system
from linkscope.hardware.system import System
from linkscope.model.comm.moe import MoePrediction, MoeRequest, predict_moe
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.fidelity.evidence import (CollectiveEntry, DisaggEntry, Entry, InferenceEntry, MemoryEntry,
                                               MoeEntry, TrainingEntry, kind_of)
from linkscope.model.ranges.classes import fabric_class, gpu_family
from linkscope.model.step.job import framework_for
from linkscope.model.step.disagg import DisaggJob, Pool, speedup_at
from linkscope.model.step.infer import InferJob, batched_prefill_s, candidate_batches, estimate_inference
from linkscope.model.step.kv_transfer import link, stream_s
from linkscope.model.step.layout import single_layout
from linkscope.model.step.job import Job
from linkscope.model.step.compute import compute_constants, usable_memory_gib
from linkscope.model.step.memory import memory_gib_per_gpu
from linkscope.model.step.train import StepEstimate, estimate_steps
from linkscope.model.step.transformer import model_presets


EVIDENCE_SYSTEMS = Path(__file__).parents[1] / "data" / "evidence_systems"
"""Clusters a source describes that no preset or offering matches (`evidence:NAME` in evidence.yaml)."""


def evidence_system(spec: str, db: HardwareDB) -> System:
    """A preset, an offering, or `evidence:NAME` (data/evidence_systems/NAME.yaml)."""
    scheme, sep, name = spec.partition(":")
    if sep and scheme == "evidence":
        return load_system_file(EVIDENCE_SYSTEMS / f"{name}.yaml", db)
    return resolve_system(spec, db)


def across_trays(entry: TrainingEntry | CollectiveEntry, db: HardwareDB) -> bool:
    """The entry's GPUs span several nodes of one NVLink domain (NCCL's multi-node NVLink, GB200 NVL72 trays)."""
    system = evidence_system(entry.system, db)
    return system.domain_spans_nodes and entry.gpus > system.node.gpus


def _step_estimate(entry: TrainingEntry, db: HardwareDB) -> StepEstimate:
    """The step model on the entry's exact layout (no search: the run's layout is known)."""
    system = evidence_system(entry.system, db).with_gpus(entry.gpus)
    job = Job(model=model_presets()[entry.model], global_batch=entry.global_batch, seq_len=entry.seq_len,
              precision=entry.precision, attention=entry.attention, dp_overlap=entry.dp_overlap,
              tp_overlap=entry.tp_overlap, peft=entry.peft, recompute_layers=entry.recompute_layers,
              moe_dispatcher=entry.moe_dispatcher, moe_a2a_overlap=entry.moe_a2a_overlap,
              fp8_activation_store=entry.fp8_activation_store, grad_precision=entry.grad_precision,
              framework=entry.framework, offload=entry.offload, offload_layers=entry.offload_layers,
              loss_fp32=entry.loss_fp32)
    sp = entry.sequence_parallel if entry.sequence_parallel is not None else entry.tp > 1
    layout = single_layout(tp=entry.tp, pp=entry.pp, dp=entry.dp, cp=entry.cp, v=entry.interleave,
                           mb=entry.micro_batch, recompute=entry.recompute, zero=entry.zero, sp=sp, ep=entry.ep,
                           etp=entry.etp)
    return estimate_steps(job, system, layout)


def predicted_step_time_s(entry: TrainingEntry, db: HardwareDB) -> float:
    """Step time of the entry's exact layout."""
    return float(_step_estimate(entry, db).step_time_s[0])


def memory_share(entry: TrainingEntry, db: HardwareDB) -> float:
    """The entry's predicted memory per GPU as a share of what a job can fill on its GPU."""
    gpu = evidence_system(entry.system, db).node.gpu
    return float(_step_estimate(entry, db).memory_gib_per_gpu[0]) / usable_memory_gib(gpu)


def predicted_memory_gib(entry: MemoryEntry) -> float:
    """Peak memory per GPU (GiB) of the entry's exact layout, as the figure the source read: what its tensors
    need at the busiest GPU's peak (`allocated`), times the fitted share the caching allocator holds above that
    where the source read its peak reserved bytes (`reserved`)."""
    needed = allocated_memory_gib(entry)
    return needed * compute_constants().reserved_over_allocated if entry.figure == "reserved" else needed


def allocated_memory_gib(entry: MemoryEntry) -> float:
    """Peak memory per GPU (GiB) the entry's tensors need at the busiest GPU's peak, in its exact layout.
    Memory depends on the job and the layout only, not on the System."""
    job = Job(model=model_presets()[entry.model], global_batch=entry.global_batch, seq_len=entry.seq_len,
              precision=entry.precision, framework=entry.framework)
    sp = entry.sequence_parallel if entry.sequence_parallel is not None else entry.tp > 1
    layout = single_layout(tp=entry.tp, pp=entry.pp, dp=entry.dp, cp=entry.cp, v=entry.interleave,
                           mb=entry.micro_batch, recompute=entry.recompute, zero=entry.zero, sp=sp)
    return float(memory_gib_per_gpu(job, None, layout)[0])


def predicted_collective(entry: CollectiveEntry, db: HardwareDB) -> float:
    """Time (us) or busbw (GB/s) of the entry's collective."""
    system = evidence_system(entry.system, db)
    system = system.with_gpus(entry.gpus) if entry.gpus > system.node.gpus else system
    tiers = comm_tiers(system)
    if entry.proto != "auto":
        tiers = replace(tiers, protocols=(entry.proto,))
    if not entry.nvls:
        tiers = replace(tiers, nvls=False)
    row = predict_sizes(system, entry.op, [entry.size_bytes], entry.gpus, entry.algo, tiers=tiers,
                        gpus_per_thread=entry.gpus_per_thread)[0]
    return row.time_us if entry.metric == "time_us" else row.busbw


def predicted_inference(entry: InferenceEntry, db: HardwareDB) -> float:
    """The entry's metric: seconds (time per output token, one prefill, a fixed batch's latency) or output
    tokens per second of the deployment's GPUs together."""
    system = evidence_system(entry.system, db)
    job = InferJob(model=model_presets()[entry.model], tp=entry.tp, pp=entry.pp, input_tokens=entry.input_tokens,
                   output_tokens=entry.output_tokens, precision=entry.precision,
                   kv_precision=entry.kv_precision, engine=entry.engine)
    # No batch: maximum load, the largest batch that fits.
    batch = entry.batch if entry.batch is not None else int(candidate_batches(job, system)[-1])
    est = estimate_inference(job, system, np.asarray([batch]))
    if entry.metric == "prefill_s":
        return float(est.prefill_s[0])
    if entry.metric == "batch_latency_s":
        # The batched prefill gives every sequence its first token; the rest are decode steps.
        return batched_prefill_s(job, system, batch) + (entry.output_tokens - 1) * float(est.decode_step_s[0])
    if entry.metric == "output_tokens_per_s":
        return float(est.tokens_per_s_per_gpu[0]) * entry.tp * entry.pp
    return float(est.cycle_s[0]) / entry.output_tokens


def _moe_prediction(entry: MoeEntry, db: HardwareDB) -> MoePrediction:
    system = evidence_system(entry.system, db)
    system = system.with_gpus(entry.ep) if entry.ep > system.node.gpus else system
    req = MoeRequest(ep=entry.ep, tokens_per_rank=entry.tokens_per_rank, hidden=entry.hidden, topk=entry.topk,
                     experts=entry.experts, precision=entry.precision, kernel=entry.kernel,
                     max_nodes_per_token=entry.max_nodes_per_token, transport=entry.transport)
    return predict_moe(comm_tiers(system), req)


def moe_transport(entry: MoeEntry, db: HardwareDB) -> str:
    """The transport the entry's dispatch or combine ran on: its own, or what `auto` gives on its System."""
    return _moe_prediction(entry, db).transport


def predicted_moe(entry: MoeEntry, db: HardwareDB) -> float:
    """Time (us) or DeepEP-convention bandwidth (GB/s) of the entry's dispatch or combine."""
    p = _moe_prediction(entry, db)
    if entry.metric == "time_us":
        return p.dispatch_us if entry.op == "dispatch" else p.combine_us
    return p.dispatch_gb_per_s if entry.op == "dispatch" else p.combine_gb_per_s


def predicted_disagg(entry: DisaggEntry, db: HardwareDB) -> float:
    """GB/s of the entry's KV transfer, or the best (rate-matched) speedup over colocated serving across its
    budgets."""
    system = evidence_system(entry.system, db)
    if entry.metric == "kv_gb_per_s":
        nbytes = float((entry.messages or 1) * (entry.message_bytes or 1))
        across = system.with_nodes(max(2, system.nodes)) if entry.path in ("rdma", "tcp") else system
        path_link = link(across, comm_tiers(across), entry.path or "rdma", entry.senders_per_node)
        return nbytes / stream_s(path_link, float(entry.messages or 1), nbytes) / 1e9
    job = DisaggJob(model_presets()[entry.model or ""], entry.input_tokens or 1, entry.output_tokens or 1,
                    Pool(entry.prefill_gpus, entry.prefill_tp), Pool(entry.decode_gpus, entry.decode_tp,
                                                                       entry.decode_ep),
                    precision=entry.precision, kv_precision=entry.kv_precision)
    tiers = comm_tiers(system)
    ratios = [r for b in entry.budgets if (r := speedup_at(job, system, tiers, b, entry.rate_matched)) is not None]
    if not ratios:
        raise ValueError(f"{entry.source}: no budget of {entry.budgets} is met by both answers")
    return max(ratios)


def measured(entry: Entry) -> float:
    """The measured value in the unit `predicted` returns."""
    return entry.step_time_s if isinstance(entry, TrainingEntry) else entry.value


def predicted(entry: Entry, db: HardwareDB) -> float:
    """The model's value for `entry`, comparable with `measured(entry)`."""
    if isinstance(entry, TrainingEntry):
        return predicted_step_time_s(entry, db)
    if isinstance(entry, CollectiveEntry):
        return predicted_collective(entry, db)
    if isinstance(entry, MoeEntry):
        return predicted_moe(entry, db)
    if isinstance(entry, DisaggEntry):
        return predicted_disagg(entry, db)
    if isinstance(entry, MemoryEntry):
        return predicted_memory_gib(entry)
    return predicted_inference(entry, db)


def evidence_class(entry: Entry, db: HardwareDB) -> tuple[str, str]:
    """(fabric class with size regime, GPU family) of the System the entry ran on, as its prediction sizes it."""
    system = evidence_system(entry.system, db)
    if isinstance(entry, (TrainingEntry, MemoryEntry)):
        system = system.with_gpus(entry.gpus)
    elif isinstance(entry, CollectiveEntry):
        system = system.with_gpus(entry.gpus) if entry.gpus > system.node.gpus else system
    elif isinstance(entry, MoeEntry):
        system = system.with_gpus(entry.ep) if entry.ep > system.node.gpus else system
    elif isinstance(entry, DisaggEntry):
        system = system.with_nodes(2) if entry.path in ("rdma", "tcp") else system
    else:
        system = system.with_nodes(max(1, -(-entry.tp * entry.pp // system.node.gpus)))
    return fabric_class(system), gpu_family(system, kind_of(entry))


Features = tuple[str | None, str | None, str | None, int | None, bool | None]


def evidence_features(entry: Entry) -> Features:
    """(precision, mode, framework, GPUs, MoE) of the entry as the range rule (model/ranges/rule.py) compares them:
    training's full or LoRA mode, framework (`auto` resolved for its ZeRO stage) and whether its model routes to
    experts, serving's engine; None where a kind has no such thing (a collective's precision) or the entry does not
    say (a KV transfer's GPUs)."""
    if isinstance(entry, TrainingEntry):
        return (entry.precision, "lora" if entry.lora_rank is not None else "full",
                framework_for(entry.framework, entry.zero, entry.pp), entry.gpus, model_presets()[entry.model].is_moe)
    if isinstance(entry, CollectiveEntry):
        return None, None, None, entry.gpus, None
    if isinstance(entry, MoeEntry):
        return entry.precision, None, None, entry.ep, None
    if isinstance(entry, InferenceEntry):
        return entry.precision, None, entry.engine, entry.tp * entry.pp, None
    if entry.metric == "speedup":
        return entry.precision, None, None, entry.prefill_gpus + entry.decode_gpus, None
    return None, None, None, None, None
