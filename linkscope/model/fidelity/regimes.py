"""Regimes of the evidence set: groups of entries that share a physical situation, whatever their source.

Leave-one-regime-out (LORO) fits the constants on everything outside a regime and predicts the regime: a
regime the other evidence cannot predict is a structural gap in the model, not a constant to refit. A regime
holds entries of one kind; an entry may belong to several regimes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from linkscope.hardware.loader import HardwareDB
from linkscope.model.fidelity.evidence import CollectiveEntry, Entry, InferenceEntry, MoeEntry, TrainingEntry
from linkscope.model.fidelity.evidence_predict import across_trays, evidence_system, memory_share, moe_transport
from linkscope.model.step.transformer import model_presets

SMALL_MODEL_PARAMS = 3e9
LARGE_JOB_GPUS = 1000
FSDP_SCALE_GPUS = 256
"""Fully sharded jobs from this many GPUs: every layer's gather and reduce-scatter crosses 32 nodes or more."""
MEMORY_EDGE_SHARE = 0.9
"""Predicted memory at or above this share of what a job can fill on its GPU."""
LONG_CONTEXT_TOKENS = 8192
SMALL_MESSAGE_BYTES = 16 * 2**20
SMALL_BATCH = 32
LONG_PROMPT_TOKENS = 4096


@dataclass(frozen=True)
class Regime:
    """One regime: an id, the kind of its entries, what it is, and who belongs."""

    id: str
    kind: str
    description: str
    member: Callable[[Entry, HardwareDB], bool]


def _gpus_per_node(entry: TrainingEntry | CollectiveEntry, db: HardwareDB) -> int:
    """GPUs of one node as NCCL sees it: a node's, or a whole NVLink domain that spans nodes."""
    return evidence_system(entry.system, db).max_nccl_node_gpus


def _training(test: Callable[[TrainingEntry, HardwareDB], bool]) -> Callable[[Entry, HardwareDB], bool]:
    return lambda e, db: isinstance(e, TrainingEntry) and test(e, db)


def _collective(test: Callable[[CollectiveEntry, HardwareDB], bool]) -> Callable[[Entry, HardwareDB], bool]:
    return lambda e, db: isinstance(e, CollectiveEntry) and test(e, db)


def _inference(test: Callable[[InferenceEntry], bool]) -> Callable[[Entry, HardwareDB], bool]:
    return lambda e, db: isinstance(e, InferenceEntry) and test(e)


def _moe_on(transport: str) -> Callable[[Entry, HardwareDB], bool]:
    return lambda e, db: isinstance(e, MoeEntry) and moe_transport(e, db) == transport


REGIMES = (
    Regime("fsdp-multi-node", "training", "fully sharded data parallel (ZeRO-3) across nodes",
           _training(lambda e, db: e.zero >= 3 and e.dp > 1 and e.gpus > _gpus_per_node(e, db))),
    Regime("fsdp-256-gpus", "training", f"fully sharded data parallel (ZeRO-3) on {FSDP_SCALE_GPUS} GPUs or more",
           _training(lambda e, db: e.zero >= 3 and e.dp > 1 and e.gpus >= FSDP_SCALE_GPUS)),
    Regime("over-1000-gpus", "training", f"jobs on {LARGE_JOB_GPUS:,} GPUs or more",
           _training(lambda e, db: e.gpus >= LARGE_JOB_GPUS)),
    Regime("memory-edge", "training", f"predicted memory >= {MEMORY_EDGE_SHARE:.0%} of what fits",
           _training(lambda e, db: memory_share(e, db) >= MEMORY_EDGE_SHARE)),
    Regime("small-models", "training", f"models under {SMALL_MODEL_PARAMS / 1e9:.0f}B parameters",
           _training(lambda e, db: model_presets()[e.model].total_params() < SMALL_MODEL_PARAMS)),
    Regime("long-context", "training", f"sequences of {LONG_CONTEXT_TOKENS:,} tokens or more",
           _training(lambda e, db: e.seq_len >= LONG_CONTEXT_TOKENS)),
    Regime("lora", "training", "LoRA fine-tunes of a frozen base (adapters train, the base only runs)",
           _training(lambda e, db: e.lora_rank is not None)),
    Regime("moe-training", "training", "mixture-of-experts models (routed experts, dispatch and combine)",
           _training(lambda e, db: model_presets()[e.model].is_moe)),
    Regime("rack-scale", "training", "jobs across the trays of an NVLink domain that spans nodes (GB200/GB300 NVL72)",
           _training(across_trays)),
    Regime("rack-scale-collectives", "collectives",
           "collectives across the trays of an NVLink domain that spans nodes (GB200/GB300 NVL72)",
           _collective(across_trays)),
    Regime("small-messages", "collectives", "messages under 16 MiB",
           _collective(lambda e, db: e.size_bytes < SMALL_MESSAGE_BYTES)),
    Regime("small-messages-one-node", "collectives", "messages under 16 MiB within one node",
           _collective(lambda e, db: e.size_bytes < SMALL_MESSAGE_BYTES and e.gpus <= _gpus_per_node(e, db))),
    Regime("small-batch-decode", "inference", f"decode-bound runs at batch <= {SMALL_BATCH}",
           _inference(lambda e: e.batch is not None and e.batch <= SMALL_BATCH and e.metric != "prefill_s")),
    Regime("max-load", "inference", "throughput at the largest batch that fits",
           _inference(lambda e: e.batch is None)),
    Regime("long-prompts", "inference", f"prompts of {LONG_PROMPT_TOKENS:,} tokens or more",
           _inference(lambda e: e.input_tokens >= LONG_PROMPT_TOKENS)),
    Regime("moe-ibgda", "moe", "expert-parallel dispatch/combine over GPU-initiated RDMA (IBGDA)", _moe_on("ibgda")),
    Regime("moe-proxy", "moe", "expert-parallel dispatch/combine through a host proxy over InfiniBand/RoCE",
           _moe_on("proxy")),
    Regime("moe-efa", "moe", "expert-parallel dispatch/combine over AWS EFA (host proxy, SRD)", _moe_on("efa")),
    Regime("moe-nvlink", "moe", "expert-parallel dispatch/combine inside one NVLink or xGMI domain",
           _moe_on("nvlink")),
)
