"""The evidence set (data/evidence.yaml, data/evidence/*.yaml and the calibration set), validated on load.

Each entry is one published measurement with its configuration. `linkscope validate` predicts every entry
with the model and reports the errors per source and per kind; the fitting procedure (model/fidelity/fit.py) fits
the model's free constants on it, leaving one source out at a time.
"""

from __future__ import annotations

import functools
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import parse_yaml_text, read_data_text
from linkscope.hardware.moe_transports import AUTO, TRANSPORTS, moe_transport_facts
from linkscope.model.calibration.calibration_set import CASES, SEQ_LEN, SYSTEM
from linkscope.model.step.compute import DEFAULT_ENGINE, ENGINES
from linkscope.model.step.layout import Recompute
from linkscope.model.step.peft import Peft

EVIDENCE_FILE = Path(__file__).parents[1] / "data" / "evidence.yaml"
EVIDENCE_DIR = Path(__file__).parents[1] / "data" / "evidence"
"""More evidence files of the same schema, one per topic, so that one topic's entries can grow on their own."""
KINDS = ("training", "collectives", "inference", "moe", "disaggregated", "memory")
EMPTY_KINDS = {
    "tuning": "a knob's speedup over its baseline (ratio of ratios) has no entries yet: the published sources the "
              "rules allow give no transformer knob speedups (PyTorch's communication-hook docs carry no figures; "
              "PowerSGD's paper measures ResNet and LSTM, which the step model does not price; the PyTorch DDP "
              "benchmark README and DeepSpeed's 1-bit Adam and ZeRO++ results are held out), and linkscope's own "
              "CPU-rank sweeps cannot be predicted: the fitted CPU step model (`calibrate`, `--system "
              "profile:NAME`) has no compression term. `linkscope compare` on bench train runs shows a knob's "
              "measured speedup against the predicted one where a System predicts them.",
}
"""Kinds `validate` lists with no entries, and why (what is missing for them to have some)."""
CALIBRATION_SOURCE = "korthikanti-2022"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Source(_Strict):
    """One publication."""

    id: str
    kind: Literal["training", "collectives", "inference", "moe", "disaggregated", "memory"]
    citation: str
    url: str
    as_of: date


class _Entry(_Strict):
    """What every entry has: its source (a Source id), the System it ran on, the measured value (in the entry's
    metric), where in the source it is printed, and what the entry assumes that the source does not say."""

    source: str
    system: str
    value: float = Field(gt=0)
    where: str
    assumed: list[str] = []


class _RunLayout(_Entry):
    """A training run's model, size and layout, as a step time and a memory figure both record them."""

    model: str
    gpus: int = Field(ge=1)
    global_batch: int = Field(ge=1)
    micro_batch: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    cp: int = Field(default=1, ge=1)
    interleave: int = Field(default=1, ge=1)
    zero: int = Field(default=1, ge=0, le=3)
    recompute: Recompute = "none"
    sequence_parallel: bool | None = None
    """Default: on whenever tp > 1 (Megatron-LM and NeMo recipes)."""
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    framework: Literal["auto", "megatron", "fsdp", "deepspeed"] = "auto"
    """The software stack that scheduled the run's communication (step.job FRAMEWORKS); auto: the usual one for
    the ZeRO stage."""

    @property
    def dp(self) -> int:
        """Data-parallel size implied by the GPU count and the model-parallel sizes."""
        return self.gpus // (self.tp * self.pp * self.cp)


class TrainingEntry(_RunLayout):
    """A training step measurement: tokens/s (per GPU or in all) or seconds per step of the global batch."""

    recompute_layers: int | None = Field(default=None, ge=1)
    """Full recomputation of this many layers per stage only (block method); None: all of them."""
    attention: Literal["flash", "flash2", "triton", "unfused"] = "flash"
    """The attention kernel the run used (model/step/job.py, ATTENTION_KERNELS)."""
    dp_overlap: bool = True
    tp_overlap: bool = False
    metric: Literal["tokens_per_s_per_gpu", "tokens_per_s", "step_time_s"]
    lora_rank: int | None = Field(default=None, ge=1)
    """A LoRA fine-tune of the frozen model at this rank (None: full training)."""
    lora_targets: Literal["attn", "attn-mlp", "all"] = "attn"
    base_precision: Literal["bf16", "fp8", "nf4"] = "bf16"
    ep: int = Field(default=1, ge=1)
    """Expert parallelism of an MoE model (folded into the tp x cp x dp ranks, as Megatron-Core does)."""
    etp: int = Field(default=1, ge=1)
    moe_dispatcher: Literal["alltoall", "deepep"] = "alltoall"
    moe_a2a_overlap: bool = False
    grad_precision: Literal["fp32", "bf16"] = "fp32"
    """Format gradients accumulate and reduce in (Megatron's `grad_reduce_in_fp32`: true is fp32)."""
    fp8_activation_store: bool = False
    """The MLP activation function's input kept in FP8 for backward (Megatron-Core's
    `activation_func_fp8_input_store`)."""
    loss_fp32: bool = True
    """The loss upcasts the logits to FP32 (step.job Job.loss_fp32); false: it runs on the BF16 logits."""
    offload: Literal["none", "optimizer", "parameters", "activations"] = "none"
    """What the run kept in host memory (DeepSpeed's offload_optimizer, FSDP's CPUOffload(offload_params),
    Megatron-Core's cpu_offloading_num_layers for activations; step.job Job.offload). The memory model leaves it
    off the GPU; the step model prices no host-side optimizer step or PCIe traffic, so such runs are predicted and
    reported but do not fit the shared constants (fit.py), which would otherwise absorb that cost."""
    offload_layers: int | None = Field(default=None, ge=1)
    """Under `activations` offload, the layers per stage whose activations went to the host."""

    @model_validator(mode="after")
    def _offloaded_layers_with_activations(self) -> TrainingEntry:
        if (self.offload == "activations") != (self.offload_layers is not None):
            raise ValueError("offload_layers is given with offload: activations, and only then")
        return self

    @property
    def peft(self) -> Peft | None:
        """The fine-tune's adapters, or None for full training."""
        if self.lora_rank is None:
            return None
        return Peft(rank=self.lora_rank, targets=self.lora_targets, base_precision=self.base_precision)

    @property
    def step_time_s(self) -> float:
        """The measured time of one step of the global batch."""
        if self.metric == "step_time_s":
            return self.value
        tokens_per_s = self.value * (self.gpus if self.metric == "tokens_per_s_per_gpu" else 1)
        return self.global_batch * self.seq_len / tokens_per_s


class CollectiveEntry(_Entry):
    """One collective at one size: nccl-tests' time (us) or busbw (GB/s)."""

    op: str
    gpus: int = Field(ge=2)
    size_bytes: int = Field(ge=1)
    algo: str = "auto"
    metric: Literal["time_us", "busbw_gb_per_s"]
    gpus_per_thread: int = Field(default=1, ge=1)
    """GPUs one nccl-tests thread drives (`-g`): 8 for `-t 1 -g 8` on one node, 1 with one process per GPU."""
    proto: Literal["auto", "LL", "LL128", "Simple"] = "auto"
    """The one protocol the run allowed (NCCL_PROTO, set by the user or by the network plugin), else auto."""
    nvls: bool = True
    """False where the run turned NVLink SHARP off (NCCL_NVLS_ENABLE=0): NCCL then picks among the others."""


INFERENCE_METRICS = ("time_per_output_token_s", "prefill_s", "batch_latency_s", "output_tokens_per_s")
"""time per output token (ITL) at a concurrency; one prefill (TTFT at concurrency 1); the end-to-end time of
a fixed batch started together; the output tokens per second of all the deployment's GPUs together."""


class InferenceEntry(_Entry):
    """A serving measurement in one of INFERENCE_METRICS. `batch` is the concurrency; omitted only for
    output_tokens_per_s under offline maximum load, where the server runs the largest batch that fits."""

    model: str
    tp: int = Field(ge=1)
    pp: int = Field(default=1, ge=1)
    batch: int | None = Field(default=None, ge=1)
    input_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    kv_precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    engine: str = DEFAULT_ENGINE
    """The serving engine's host loop (model/step/compute.py, ENGINES) the measurement ran."""
    metric: Literal["time_per_output_token_s", "prefill_s", "batch_latency_s", "output_tokens_per_s"]

    @model_validator(mode="after")
    def _batch_given_unless_max_load(self) -> InferenceEntry:
        if self.engine not in ENGINES:
            raise ValueError(f"engine '{self.engine}' is not one of {', '.join(ENGINES)}")
        if self.batch is None and self.metric != "output_tokens_per_s":
            raise ValueError(f"batch is required for metric {self.metric} (only output_tokens_per_s may "
                             f"omit it, meaning maximum load)")
        return self


class MoeEntry(_Strict):
    """One MoE dispatch or combine: time (us) or bandwidth (GB/s) in DeepEP's convention (received token copies
    per rank inside the NVLink domain; bytes once per destination node across nodes)."""

    source: str
    system: str
    ep: int = Field(ge=1)
    tokens_per_rank: int = Field(ge=1)
    hidden: int = Field(ge=1)
    topk: int = Field(ge=1)
    experts: int = Field(ge=1)
    precision: Literal["fp8", "bf16"] = "fp8"
    kernel: str
    """A kernel name or alias of hardware/data/moe_transports.yaml (deepep-ll, uccl-ep-normal, low-latency...)."""
    transport: str = AUTO
    """What the run used (hardware/data/moe_transports.yaml) where `auto`, what the System and the kernel give,
    would not say it."""
    max_nodes_per_token: int | None = Field(default=None, ge=1)
    op: Literal["dispatch", "combine"]
    metric: Literal["time_us", "gb_per_s"]
    value: float = Field(gt=0)
    where: str
    assumed: list[str] = []

    @model_validator(mode="after")
    def _known_kernel(self) -> MoeEntry:
        names = moe_transport_facts().all_kernel_names()
        if self.kernel not in names:
            raise ValueError(f"kernel '{self.kernel}' is not one of {', '.join(names)}")
        if self.transport not in (AUTO, *TRANSPORTS):
            raise ValueError(f"transport '{self.transport}' is not one of {', '.join((AUTO, *TRANSPORTS))}")
        return self


class DisaggEntry(_Entry):
    """Disaggregated serving: a KV transfer between pools (`kv_gb_per_s`: one rank's pages over one path, the
    bytes over the time), or the end-to-end verdict (`speedup`: the best tokens/s per GPU of the disaggregated
    deployment over colocated serving on the same GPUs across `budgets` tokens/s per user, rate-matched as the
    source plots it when `rate_matched`)."""

    metric: Literal["kv_gb_per_s", "speedup"]
    path: Literal["nvlink", "pcie", "rdma", "tcp"] | None = None
    messages: int | None = Field(default=None, ge=1)
    """Pages one rank posts in the transfer."""
    message_bytes: int | None = Field(default=None, ge=1)
    senders_per_node: int = Field(default=1, ge=1)
    model: str | None = None
    input_tokens: int | None = Field(default=None, ge=1)
    output_tokens: int | None = Field(default=None, ge=1)
    precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    kv_precision: Literal["bf16", "fp16", "fp8"] = "bf16"
    prefill_gpus: int = Field(default=1, ge=1)
    prefill_tp: int = Field(default=1, ge=1)
    decode_gpus: int = Field(default=1, ge=1)
    decode_tp: int = Field(default=1, ge=1)
    decode_ep: int = Field(default=1, ge=1)
    budgets: list[float] = []
    rate_matched: bool = True

    @model_validator(mode="after")
    def _what_the_metric_needs(self) -> DisaggEntry:
        if self.metric == "kv_gb_per_s" and (self.path is None or self.messages is None or self.message_bytes is None):
            raise ValueError("kv_gb_per_s needs path, messages and message_bytes")
        if self.metric == "speedup" and (self.model is None or self.input_tokens is None
                                         or self.output_tokens is None or not self.budgets):
            raise ValueError("speedup needs model, input_tokens, output_tokens and budgets")
        return self


class MemoryEntry(_RunLayout):
    """Peak memory of one GPU of a training run (GiB), the busiest GPU where the source takes the maximum over
    them. `figure` says what was read: `reserved` (the caching allocator's peak reserved bytes, what torchtitan
    logs as "memory") or `allocated` (peak allocated tensors, Megatron's "max allocated"). The model predicts
    what tensors need (allocated); a reserved figure sits above that by the allocator's fragmentation."""

    figure: Literal["reserved", "allocated"]
    metric: Literal["memory_gib"] = "memory_gib"


class EvidenceFile(_Strict):
    """data/evidence.yaml."""

    version: int
    as_of: date
    sources: list[Source]
    training: list[TrainingEntry] = []
    collectives: list[CollectiveEntry] = []
    inference: list[InferenceEntry] = []
    moe: list[MoeEntry] = []
    disaggregated: list[DisaggEntry] = []
    memory: list[MemoryEntry] = []


Entry = TrainingEntry | CollectiveEntry | InferenceEntry | MoeEntry | DisaggEntry | MemoryEntry


def kind_of(entry: Entry) -> str:
    """training, collectives, inference, moe, disaggregated or memory."""
    if isinstance(entry, TrainingEntry):
        return "training"
    if isinstance(entry, MemoryEntry):
        return "memory"
    if isinstance(entry, MoeEntry):
        return "moe"
    if isinstance(entry, DisaggEntry):
        return "disaggregated"
    return "collectives" if isinstance(entry, CollectiveEntry) else "inference"


class EvidenceSet:
    """Every entry with its source, the calibration set first."""

    def __init__(self, data: EvidenceFile) -> None:
        self.sources: dict[str, Source] = {CALIBRATION_SOURCE: _CALIBRATION, **{s.id: s for s in data.sources}}
        self.training: list[TrainingEntry] = [*calibration_entries(), *data.training]
        self.collectives: list[CollectiveEntry] = list(data.collectives)
        self.inference: list[InferenceEntry] = list(data.inference)
        self.moe: list[MoeEntry] = list(data.moe)
        self.disaggregated: list[DisaggEntry] = list(data.disaggregated)
        self.memory: list[MemoryEntry] = list(data.memory)

    def entries(self, kind: str) -> list[Entry]:
        """The entries of one kind."""
        by_kind: dict[str, list[Entry]] = {"training": list(self.training), "collectives": list(self.collectives),
                                           "inference": list(self.inference), "moe": list(self.moe),
                                           "disaggregated": list(self.disaggregated),
                                           "memory": list(self.memory)}
        return by_kind[kind]


_CALIBRATION = Source(id=CALIBRATION_SOURCE, kind="training",
                      citation="Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer "
                               "Models', iteration times on Selene (DGX A100 80 GB); configurations as Calculon's "
                               "validation reproduces them",
                      url="https://arxiv.org/abs/2205.05198", as_of=date(2022, 5, 10))


def calibration_entries() -> list[TrainingEntry]:
    """The calibration set (linkscope.model.calibration.calibration_set) as evidence entries."""
    return [TrainingEntry(source=CALIBRATION_SOURCE, system=SYSTEM, model=c.model, gpus=c.gpus,
                          global_batch=c.global_batch, micro_batch=c.micro_batch, seq_len=SEQ_LEN, tp=c.tp, pp=c.pp,
                          interleave=c.interleave, zero=0, recompute=c.recompute,
                          sequence_parallel=c.sequence_parallel, attention="unfused", dp_overlap=False,
                          metric="step_time_s",
                          value=c.step_time_s, where=f"{c.model}, {c.recompute} recomputation")
            for c in CASES]


def equal_source_weights(sources: list[str]) -> list[float]:
    """Per entry, named by its source: 1 / (that source's entries), so that each source weighs the same in a
    loss whatever its number of rows."""
    counts = {s: sources.count(s) for s in set(sources)}
    return [1.0 / counts[s] for s in sources]


def _read_evidence_file(path: Path) -> EvidenceFile:
    raw = parse_yaml_text(read_data_text(path), str(path))
    try:
        return EvidenceFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(path), err["msg"], field=".".join(map(str, err["loc"]))) from None


def _merged(files: dict[Path, EvidenceFile]) -> EvidenceFile:
    """One evidence file out of several; a source id given twice or an entry naming a source its own file does
    not list is a DataError naming the file."""
    seen: dict[str, Path] = {}
    for path, data in files.items():
        known = {s.id for s in data.sources}
        for source in data.sources:
            if source.id in seen:
                raise DataError(str(path), f"source '{source.id}' is also listed in {seen[source.id].name}",
                                field="sources.id")
            seen[source.id] = path
        entries: list[Entry] = [*data.training, *data.collectives, *data.inference, *data.moe, *data.disaggregated,
                                *data.memory]
        for entry in entries:
            if entry.source not in known:
                raise DataError(str(path), f"unknown source '{entry.source}'", field="source")
    parts = list(files.values())
    return EvidenceFile(version=parts[0].version, as_of=max(p.as_of for p in parts),
                        sources=[s for p in parts for s in p.sources],
                        training=[e for p in parts for e in p.training],
                        collectives=[e for p in parts for e in p.collectives],
                        inference=[e for p in parts for e in p.inference],
                        moe=[e for p in parts for e in p.moe],
                        disaggregated=[e for p in parts for e in p.disaggregated],
                        memory=[e for p in parts for e in p.memory])


@functools.cache
def load_evidence(path: Path = EVIDENCE_FILE) -> EvidenceSet:
    """The evidence set, validated; a malformed file is a DataError naming the entry and field. The packaged
    set is data/evidence.yaml plus every data/evidence/*.yaml; another `path` is read alone."""
    return read_evidence([path, *sorted(EVIDENCE_DIR.glob("*.yaml"))] if path == EVIDENCE_FILE else [path])


def read_evidence(paths: list[Path]) -> EvidenceSet:
    """The evidence set of several files of the evidence schema, each validated; a source id is listed once."""
    return EvidenceSet(_merged({p: _read_evidence_file(p) for p in paths}))
