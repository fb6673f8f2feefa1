"""`predict train`: one answer for one job on one System, with its layout resolved, flags and a bottleneck.

Impossible layouts (TP not dividing the heads, a product that is not the GPU count, a batch that does not
divide) are UserErrors. Legal but unwise ones (TP across nodes, a layout that does not fit) are predicted and
flagged.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.ranges.accuracy import rate_range, spread, time_range
from linkscope.model.ranges.records import above_record_flag, best_record
from linkscope.model.step.compute import usable_memory_gib
from linkscope.model.step.layout import Layout
from linkscope.model.ranges.mfu import MfuPeak, mfu_peak
from linkscope.model.step.search import LayoutRequest, SearchResult, search
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.step.job import FRAMEWORK_ZERO_STAGES, Job, framework_for
from linkscope.model.step import knobs as knob_rules
from linkscope.model.step import peft as lora
from linkscope.model.step.knob_effect import knob_effect
from linkscope.model.step.memory import gradient_bytes
from linkscope.model.step.train import StepEstimate



class SystemInForce(Protocol):
    """What `--system` resolved to, as the step model sees it (`model.calibration.systems.ResolvedSystem`).

    A protocol rather than the class: the resolved System carries calibrations, which sit a floor above the step
    model and load it."""

    @property
    def system(self) -> System: ...

    @property
    def tiers(self) -> CommTiers: ...

    @property
    def training_notes(self) -> tuple[str, ...]: ...

    def with_nodes(self, nodes: int) -> SystemInForce: ...

    def computing(self) -> AbstractContextManager[None]: ...

BREAKDOWN_KEYS = ("compute_s", "tp_comm_exposed_s", "cp_comm_exposed_s", "ep_comm_exposed_s", "pp_comm_exposed_s",
                  "dp_comm_exposed_s", "bubble_s", "optimizer_s", "recompute_s", "moe_fixed_s", "knob_compute_s")


@dataclass
class TrainPrediction:
    """What `linkscope predict train --json` prints."""

    system: str
    model: str
    gpus: int
    nodes: int
    global_batch: int
    seq_len: int
    precision: str
    step_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float
    mfu: float
    """Against `mfu_peak_tflops`, the dense peak of `mfu_precision` (model/ranges/mfu.py)."""
    memory_gib_per_gpu: float
    memory_gib_available: float
    fits: bool
    breakdown: dict[str, float]
    parallelism: Layout
    bottleneck: str
    flags: list[str] = field(default_factory=list)
    layouts_evaluated: int = 1
    framework: str = "auto"
    """How data-parallel communication is scheduled (model/step/job.py FRAMEWORKS), resolved for the layout."""
    framework_given: bool = False
    """False: `framework` is the usual one for the layout's ZeRO stage, not the user's choice."""
    step_time_s_range: list[float] = field(default_factory=list)
    """p10..p90 of the step time, from the leave-one-source-out errors of training predictions."""
    tokens_per_s_range: list[float] = field(default_factory=list)
    expert_layout: str = ""
    """For an MoE model: where the chosen expert parallelism sits and why."""
    total_params: int = 0
    active_params: int = 0
    """Weights a token's matmuls use (topk routed experts of an MoE model; all weights of a dense one)."""
    range_basis: str = ""
    """What evidence the ranges come from (`model.ranges.accuracy.spread`), or that there is none."""
    range_note: str | None = None
    """What a user must know about the ranges: far from all evidence, widened outside its class (also a flag)."""
    rank_kind: str = "GPU"
    """What one rank is: `GPU`, or `CPU rank` for a prediction from a profile fitted on CPU ranks."""
    peft: dict[str, Any] | None = None
    """The LoRA settings of a fine-tune (None: full training)."""
    trainable_params: int = 0
    frozen_params: int = 0
    least_memory_gib_per_gpu: float | None = None
    """When no layout fits: the least memory per GPU any layout with the values given needs."""
    knobs: dict[str, Any] | None = None
    """What the data-parallel knobs cost and save on the chosen layout (`knob_effect.KnobEffect`); None: none."""
    mfu_peak_tflops: float = 0.0
    """The dense tensor peak the MFU is taken against (0 where none is defined, as on CPU ranks)."""
    mfu_precision: str = ""
    """The number format of that peak: the job's (`fp16` for a BF16 job on a GPU without BF16)."""
    mfu_best_recorded: float | None = None
    """The best MFU the evidence set records on this GPU family in this format (None: no record)."""
    physical_flags: list[str] = field(default_factory=list)
    """The flags (also in `flags`) saying a figure is held at a physical bound or above every recorded run."""

    @property
    def peak(self) -> MfuPeak:
        """The peak the MFU is taken against, as the one owner describes it."""
        return MfuPeak(gpu="", family="", precision=self.mfu_precision, tflops=self.mfu_peak_tflops)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**self.__dict__, "parallelism": self.parallelism.as_dict()}

    @property
    def range_features(self) -> dict[str, Any]:
        """What the prediction's range compares with the evidence besides its System (`range_features`; an MoE
        model's prediction names its expert layout)."""
        return range_features(self.precision, self.peft is not None, self.framework, self.gpus,
                              bool(self.expert_layout))


def validate_request(job: Job, system: System, req: LayoutRequest) -> None:
    """Reject layouts that cannot run at all, naming the flag."""
    m, gpus = job.model, system.gpus
    if job.precision == "fp8" and system.node.gpu.fp8_dense_tflops is None:
        raise UserError(f"{system.node.gpu.id} has no FP8 tensor cores (use bf16)", field="precision")
    if job.peft is not None:
        gpu = system.node.gpu
        problem = (lora.check_peft(job.peft, m) or lora.check_peft_layout(job.peft, req.tp, req.pp)
                   or lora.check_peft_gpu(job.peft, gpu.id, gpu.fp8_dense_tflops is not None))
        if problem:
            raise UserError(problem)
    if req.tp is not None:
        if req.tp < 1 or m.heads % req.tp:
            raise UserError(f"{req.tp} does not divide the {m.heads} attention heads of {m.id}", field="tp")
        if m.kv_heads % req.tp and req.tp % m.kv_heads:
            raise UserError(f"{req.tp} does not divide the {m.kv_heads} KV heads of {m.id}", field="tp")
    _validate_experts(job, req)
    if req.pp is not None and (req.pp < 1 or req.pp > m.layers):
        raise UserError(f"{req.pp} must be between 1 and the {m.layers} layers of {m.id}", field="pp")
    fixed = [v for v in (req.tp, req.pp, req.dp, req.cp) if v is not None]
    product = int(np.prod(fixed)) if fixed else 1
    if gpus % product or (len(fixed) == 4 and product != gpus):
        raise UserError(f"tp x pp x dp x cp = {product} does not match {gpus} GPUs")
    if req.micro_batch is not None and req.micro_batch < 1:
        raise UserError(f"must be at least 1 (got {req.micro_batch})", field="micro_batch")
    if req.dp is not None and job.global_batch % (req.dp * (req.micro_batch or 1)):
        raise UserError(f"{job.global_batch} is not divisible by dp x micro-batch = "
                        f"{req.dp * (req.micro_batch or 1)}", field="global_batch")
    stages = FRAMEWORK_ZERO_STAGES.get(job.framework)
    if stages is not None and req.zero is not None and req.zero not in stages:
        raise UserError(f"{job.framework} does not run ZeRO stage {req.zero} (it runs "
                        f"{', '.join(map(str, stages))})", field="framework")
    if job.framework == "deepspeed" and (req.zero or 0) >= 2 and (req.pp or 1) > 1:
        # As the README says: DeepSpeed's pipeline engine runs ZeRO stages 0 and 1 only.
        raise UserError(f"DeepSpeed's pipeline engine runs ZeRO stages 0-1 only, not ZeRO-{req.zero} with --pp "
                        f"{req.pp} (use --zero 1, --pp 1, or --framework fsdp)", field="framework")
    # The deepest stage holds ceil(layers / pp) layers (the first and last may hold fewer); its chunks are equal.
    if req.interleave is not None and req.pp is not None and req.interleave > 1 and \
            (-(-m.layers // req.pp) % req.interleave):
        raise UserError(f"{req.interleave}: {m.layers} layers do not split into "
                        f"{req.pp} x {req.interleave} chunks", field="interleave")


def _validate_experts(job: Job, req: LayoutRequest) -> None:
    """--ep and --etp: at least 1, dividing the experts (and an expert's width), only for an MoE model."""
    m = job.model
    for value, flag in ((req.ep, "ep"), (req.etp, "etp")):
        if value is not None and value < 1:
            raise UserError(f"must be at least 1 (got {value})", field=flag)
    if not m.is_moe:
        if (req.ep or 1) > 1 or (req.etp or 1) > 1:
            raise UserError(f"{m.id} has no experts (a dense model); expert parallelism needs an MoE model",
                            field="ep" if (req.ep or 1) > 1 else "etp")
        return
    if req.ep is not None and m.experts % req.ep:
        raise UserError(f"{req.ep} does not divide the {m.experts} experts of {m.id}", field="ep")
    if req.etp is not None and m.moe_ffn_hidden % req.etp:
        raise UserError(f"{req.etp} does not divide the expert width {m.moe_ffn_hidden} of {m.id}", field="etp")


def _unit(system: System) -> str:
    """What NCCL's node is on this System, for messages: a node, or an NVLink domain that spans nodes."""
    return "NVLink domain" if system.domain_spans_nodes else "node"


def _flags(job: Job, system: System, row: Layout, est: StepEstimate, i: int) -> list[str]:
    flags = []
    per_node = system.nccl_node_gpus
    if row.tp > per_node:
        flags.append(f"tensor parallelism ({row.tp}) spans {_unit(system)}s: every layer's collectives cross the "
                     f"network")
    if not bool(est.fits[i]):
        flags.append(f"does not fit: {est.memory_gib_per_gpu[i]:.1f} GiB per GPU needed, "
                     f"{usable_memory_gib(system.node.gpu):.1f} GiB usable of {system.node.gpu.memory_gib:g} on a "
                     f"{system.node.gpu.id}")
    if est.microbatches[i] < row.pp:
        flags.append(f"{est.microbatches[i]:g} micro-batches for {row.pp} pipeline stages: the bubble dominates")
    if row.tp * row.cp * row.dp < per_node and row.pp > 1 and system.nccl_nodes > 1:
        flags.append(f"pipeline stages share {_unit(system)}s while data parallel groups span them")
    return flags


def _moe_path_text(job: Job, system: System, row: Layout) -> str:
    """` (kernel over transport: why)` for the dispatcher's all-to-alls."""
    from linkscope.model.comm.moe import moe_path
    from linkscope.model.comm.tiers import comm_tiers

    kernel = "deepep-normal" if job.moe_dispatcher == "deepep" else "nccl"
    nodes = -(-row.ep * row.etp // system.nccl_node_gpus)
    runs, transport, why = moe_path(comm_tiers(system), kernel, job.moe_transport, nodes)
    return f" ({runs} over {transport}: {why})"


def _ep_reason(job: Job, system: System, row: Layout, given: bool = False) -> str:
    """Where the chosen expert parallelism sits and what it trades (or that the user chose it)."""
    m, per_node = job.model, system.nccl_node_gpus
    where = "inside one NVLink domain" if row.ep * row.etp <= per_node else \
        f"across {-(-row.ep * row.etp // per_node)} {_unit(system)}s (dispatch and combine cross the network)"
    return (f"ep {row.ep} x etp {row.etp} {where}: {m.experts // row.ep} of {m.experts} experts per GPU, "
            f"{job.moe_dispatcher} dispatcher{_moe_path_text(job, system, row)}; " + ("as given (--ep)" if given else
            "the fastest fitting of the ep sizes searched (a smaller ep keeps all-to-all on NVLink but holds more "
            "expert weights per GPU)"))


def idle_gpus_note(system: System, gpus: int) -> str:
    """What a layout on `gpus` of the System's GPUs leaves idle: GPUs of each node, or whole nodes of each NVLink
    domain that spans nodes."""
    domains, per_domain = system.domain_split()
    used = gpus // domains
    if system.domain_spans_nodes:
        per_node = system.node.gpus
        return (f"uses {used} of the {per_domain} GPUs per NVLink domain ({used // per_node} of its "
                f"{per_domain // per_node} nodes): no layout divides {per_domain} (the rest stay idle)")
    return f"uses {used} of the {per_domain} GPUs per node: no layout divides {per_domain} (the rest stay idle)"


def bottleneck_sentence(breakdown: dict[str, float], step_s: float) -> str:
    """One sentence naming what the step time goes to, beyond useful compute."""
    names = {"tp_comm_exposed_s": "tensor-parallel communication", "pp_comm_exposed_s": "pipeline send/recv",
             "dp_comm_exposed_s": "data-parallel gradient traffic", "bubble_s": "the pipeline bubble",
             "recompute_s": "activation recomputation", "optimizer_s": "the optimizer step",
             "cp_comm_exposed_s": "context-parallel communication",
             "ep_comm_exposed_s": "expert-parallel dispatch and combine",
             "moe_fixed_s": "the MoE layers' fixed time (kernels issued one by one)",
             "knob_compute_s": "encoding and decoding compressed gradients"}
    overheads = {k: v for k, v in breakdown.items() if k in names}
    worst = max(overheads, key=lambda k: overheads[k])
    share = overheads[worst] / step_s if step_s > 0 else 0.0
    compute_share = breakdown["compute_s"] / step_s if step_s > 0 else 0.0
    if share < 0.05:
        return f"compute-bound: {compute_share:.0%} of the step is compute; no overhead above 5%"
    return f"{names[worst]} takes {share:.0%} of the step ({overheads[worst]:.3g} s); compute is {compute_share:.0%}"


def summarize(job: Job, system: System, result: SearchResult, i: int | None = None) -> TrainPrediction:
    """The prediction for layout `i` (the search's best by default)."""
    i = result.best if i is None else i
    est, row = result.estimate, result.layouts.row(i)
    breakdown = {k: float(getattr(est, k)[i]) for k in BREAKDOWN_KEYS}
    step = float(est.step_time_s[i])
    gpus = row.tp * row.pp * row.dp * row.cp
    flags = _flags(job, system, row, est, i)
    features = training_range_features(job, framework_for(job.framework, row.zero, row.pp), gpus)
    evidence = spread("training", system, **features)
    if evidence.note:
        flags.append(evidence.note)
    if gpus < system.gpus:
        flags.insert(0, idle_gpus_note(system, gpus))
    peak = mfu_peak(system.node.gpu, job.precision)
    physical = _physical_flags(est, i, peak)
    flags.extend(physical)
    record = best_record("training", peak) if peak.tflops > 0 else None
    return TrainPrediction(
        system=system.id, model=job.model.id, gpus=gpus, nodes=system.nodes, global_batch=job.global_batch,
        seq_len=job.seq_len, precision=job.precision, step_time_s=step, tokens_per_s=float(est.tokens_per_s[i]),
        tflops_per_gpu=float(est.tflops_per_gpu[i]), mfu=float(est.mfu[i]),
        memory_gib_per_gpu=float(est.memory_gib_per_gpu[i]),
        memory_gib_available=usable_memory_gib(system.node.gpu),
        fits=bool(est.fits[i]), breakdown=breakdown, parallelism=row,
        bottleneck=bottleneck_sentence(breakdown, step), flags=flags,
        layouts_evaluated=result.evaluated, framework=framework_for(job.framework, row.zero, row.pp),
        framework_given=job.framework != "auto",
        step_time_s_range=list(time_range(step, "training", system, **features)),
        tokens_per_s_range=list(rate_range(float(est.tokens_per_s[i]), "training", system, **features)),
        range_basis=evidence.basis, range_note=evidence.note, **_param_counts(job),
        active_params=job.model.active_params(),
        expert_layout=_ep_reason(job, system, row) if job.model.is_moe else "",
        mfu_peak_tflops=peak.tflops, mfu_precision=peak.precision,
        mfu_best_recorded=record.mfu if record else None, physical_flags=physical)


def _physical_flags(est: StepEstimate, i: int, peak: MfuPeak) -> list[str]:
    """A step held at the peak's bound, and an MFU above every recorded run of the GPU family and format."""
    flags = []
    if est.peak_bound.size and bool(est.peak_bound[i]):
        flags.append(f"the step's parts add up to less than its model FLOPs at {peak.label}: the step time is held "
                     f"at that bound (100% MFU), a figure no run reaches")
    above = above_record_flag("training", float(est.mfu[i]), peak) if peak.tflops > 0 else None
    if above:
        flags.append(above)
    return flags


def training_range_features(job: Job, framework: str, gpus: int) -> dict[str, Any]:
    """`range_features` of a training job laid out under `framework` on `gpus` GPUs."""
    return range_features(job.precision, job.peft is not None, framework, gpus, job.model.is_moe)


def range_features(precision: str, lora: bool, framework: str, gpus: int, moe: bool) -> dict[str, Any]:
    """What a training prediction's range compares with the evidence besides its System: precision, full
    training or LoRA, the framework the layout runs under, the GPUs it uses and whether the model routes tokens to
    experts (`model.ranges.rule.Query`)."""
    return {"precision": precision, "mode": "lora" if lora else "full", "framework": framework, "gpus": gpus,
            "moe": moe}


def _param_counts(job: Job) -> dict[str, Any]:
    """`peft`, `total_params`, `trainable_params` and `frozen_params` of the prediction."""
    m, peft = job.model, job.peft
    if peft is None:
        return {"peft": None, "total_params": m.total_params(), "trainable_params": m.total_params(),
                "frozen_params": 0}
    return {"peft": peft.as_dict(), "total_params": m.total_params(),
            "trainable_params": lora.trainable_params(m, peft), "frozen_params": lora.frozen_params(m)}


def with_knobs(job: Job, req: LayoutRequest) -> tuple[Job, LayoutRequest]:
    """The job and request the knobs imply: DeepSpeed for 1-bit Adam and ZeRO++, and the only ZeRO stage a knob
    runs with (PowerSGD and 1-bit Adam: 0; ZeRO++: 3) unless one is given; checked (one line if they cannot run)."""
    if not job.knobs.active:
        return job, req
    job = replace(job, framework=knob_rules.knob_framework(job.knobs, job.framework))
    req = replace(req, zero=knob_rules.constrained_zero(job.knobs, req.zero))
    knob_rules.check_knobs(job.knobs, job.model, job.framework, req.zero, gradient_bytes(job))
    return job, req


def predict_train(job: Job, system: System, req: LayoutRequest, tiers: CommTiers | None = None) -> TrainPrediction:
    """Validate, search what is left open, and summarise the chosen layout."""
    job, req = with_knobs(job, req)
    validate_request(job, system, req)
    result = search(job, system, req, tiers)
    prediction = summarize(job, system, result)
    if job.knobs.active:
        effect = knob_effect(job, system, result.layouts.row(result.best), tiers)
        prediction.knobs = effect.as_dict()
        if effect.optimisation:
            prediction.flags.append(f"{effect.label} changes the optimisation: {effect.optimisation}")
    if req.ep is not None and job.model.is_moe:
        prediction.expert_layout = _ep_reason(job, system, result.layouts.row(result.best), given=True)
    if result.any_fits:
        return prediction
    least_gib = float(result.estimate.memory_gib_per_gpu[result.least_memory_index])
    prediction.least_memory_gib_per_gpu = least_gib
    if req.ep is not None and job.model.is_moe:
        raise UserError(f"the experts of {job.model.id} do not fit at ep {req.ep}: the smallest layout needs "
                        f"{least_gib:.1f} GiB per GPU of {prediction.memory_gib_available:.1f}; "
                        f"raise ep or add GPUs", field="ep")
    prediction.flags.insert(0, f"no layout fits in memory: showing the one that needs the least with the values "
                               f"given, {least_gib:.1f} GiB per GPU of {prediction.memory_gib_available:.1f} usable "
                               f"(a value you give, e.g. --interleave or --recompute, is never traded for memory)")
    return prediction


def predict_train_on(job: Job, resolved: SystemInForce, req: LayoutRequest) -> TrainPrediction:
    """`predict_train` on a resolved `--system`: its tiers, its compute calibration, and its notes as flags."""
    with resolved.computing():
        prediction = predict_train(job, resolved.system, req, resolved.tiers)
    prediction.flags.extend(resolved.training_notes)
    return prediction
