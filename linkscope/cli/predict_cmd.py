"""`linkscope predict collective|train|infer|scaling`: parse, call the model, print.

What one command alone uses (its table, the inference and scaling models) is imported inside it, so that
`predict train --json` starts without rich's tables or the other commands' models.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from linkscope.cli.common import console, print_json, user_errors
from linkscope.cli.knob_output import print_knob_effect
from linkscope.cli.options import (DpOpt, TrainGpusOpt, TrainNodesOpt, AttentionOpt, BasePrecisionOpt, BucketMbOpt,
                                   GradCompressionOpt, ZeroppOpt, job_knobs, BlockTokensOpt, KvGranularityOpt,
                                   KvOverlapOpt, KvPrecisionOpt, KvTransportOpt, CatalogOpt, DpOverlapOpt, EngineOpt,
                                   EpOpt, EtpOpt, FrameworkOpt, GlobalBatchOpt, InputTokensOpt, InterleaveOpt,
                                   LatencyBudgetOpt, LoraRankOpt, LoraTargetsOpt, MicroBatchOpt, ModelOpt,
                                   MoeA2aOverlapOpt, MoeDispatcherOpt, MoeImbalanceOpt, OutputTokensOpt, PeftOpt,
                                   PrecisionOpt, PrefillInterferenceOpt, RecomputeOpt, SeqLenOpt, SequenceParallelOpt,
                                   SystemOpt, TpOverlapOpt, TransportOpt, ZeroOpt, auto_int, check_framework,
                                   check_option, check_zero, choice, layout_request, peft_of, pp_opt, tp_opt,
                                   training_job, transport_choice)
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.calibration.systems import ResolvedSystem, resolve, split_profile
from linkscope.model.step.compute import ENGINES, PRECISIONS
from linkscope.model.step.predict import predict_train_on
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.transformer import ModelConfig, load_model

if TYPE_CHECKING:
    from linkscope.model.calibration.profiles import Profile
    from linkscope.model.step.infer import InferJob, InferPick
    from linkscope.model.calibration.train_fit import TrainFit
    from linkscope.model.step.predict import TrainPrediction

predict_app = typer.Typer(help="Predict collectives, training steps, inference and scaling on any System.",
                          no_args_is_help=True)

MAX_BYTES = 1 << 50


@predict_app.command("collective")
@user_errors
def collective(
    system: str = SystemOpt,
    op: str = typer.Option("all_reduce", help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                                              "all_to_all, sendrecv, gather, scatter."),
    size: str = typer.Option("64M", "--bytes", "-B", help="Message size as nccl-tests' size column (8, 64K, 1G)."),
    gpus: Optional[int] = typer.Option(None, help="GPUs taking part; beyond one node means several nodes."),
    algo: str = typer.Option("auto", help="auto, ring, tree, nvls, nvls_tree, collnet, hierarchical, direct."),
    sweep: bool = typer.Option(False, "--sweep", help="Every power of two from 8 B up to --bytes."),
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Time, algbw and busbw of one collective, which algorithm NCCL would pick and what limits it."""
    from linkscope.bench.sizes import parse_size
    from linkscope.model.calibration.profiles import load_profile, predict_from_profile
    from linkscope.model.comm.predict import predict_sizes

    nbytes = parse_size(size, "--bytes")
    if nbytes > MAX_BYTES:
        raise UserError(f"--bytes must be at most {MAX_BYTES} (1 PiB) (got {nbytes})")
    check_option(gpus, "--gpus")
    sizes = [1 << k for k in range(3, nbytes.bit_length()) if (1 << k) < nbytes] + [nbytes] if sweep else [nbytes]
    name = split_profile(system)
    if name is not None:
        rows = predict_from_profile(load_profile(name), op, sizes, gpus)
    else:
        resolved = resolve(system, load_db(extra or []))
        rows = predict_sizes(resolved.system, op, sizes, gpus, algo, resolved.tiers)
    if as_json:
        print_json([r.as_dict() for r in rows] if sweep else rows[0].as_dict())
    else:
        from linkscope.report.predict import collective_table

        domains = rows[0].nvlink_domains
        where = f" in {domains} NVLink domain{'s' if domains > 1 else ''}" if domains else ""
        console.print(collective_table(rows, f"{op} on {system}, {rows[0].gpus} GPUs, {rows[0].nodes} node(s)"
                                             f"{where}"))
        if rows[0].range_basis:
            console.print(f"ranges from {rows[0].range_basis}", highlight=False, markup=False, soft_wrap=True)
        if rows[0].range_note:
            console.print(f"range note: {rows[0].range_note}", highlight=False, markup=False, soft_wrap=True)


def _resolved(spec: str, gpus: int | None, nodes: int | None, extra: list[Path]) -> ResolvedSystem:
    check_option(gpus, "--gpus")
    check_option(nodes, "--nodes")
    return resolve(spec, load_db(extra), gpus, nodes)


@predict_app.command("train")
@user_errors
def train(
    system: str = SystemOpt,
    model: str = ModelOpt,
    gpus: Optional[int] = TrainGpusOpt,
    nodes: Optional[int] = TrainNodesOpt,
    tp: Optional[str] = tp_opt(),
    pp: Optional[str] = pp_opt(),
    dp: Optional[str] = DpOpt,
    cp: str = typer.Option("1", help="Context parallel size or auto."),
    interleave: Optional[str] = InterleaveOpt,
    micro_batch: Optional[str] = MicroBatchOpt,
    global_batch: Optional[int] = GlobalBatchOpt,
    seq_len: Optional[int] = SeqLenOpt,
    recompute: str = RecomputeOpt,
    sequence_parallel: Optional[bool] = SequenceParallelOpt,
    zero: Optional[int] = ZeroOpt,
    ep: Optional[str] = EpOpt,
    etp: str = EtpOpt,
    moe_dispatcher: str = MoeDispatcherOpt,
    moe_a2a_overlap: bool = MoeA2aOverlapOpt,
    moe_imbalance: float = MoeImbalanceOpt,
    transport: str = TransportOpt,
    precision: str = PrecisionOpt,
    attention: str = AttentionOpt,
    framework: str = FrameworkOpt,
    dp_overlap: Optional[bool] = DpOverlapOpt,
    tp_overlap: bool = TpOverlapOpt,
    peft: Optional[str] = PeftOpt,
    lora_rank: int = LoraRankOpt,
    lora_targets: str = LoraTargetsOpt,
    base_precision: str = BasePrecisionOpt,
    grad_compression: str = GradCompressionOpt,
    bucket_mb: Optional[float] = BucketMbOpt,
    zeropp: Optional[str] = ZeroppOpt,
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Step time, throughput, MFU, memory per GPU and where the time goes; `auto` values are searched."""
    knobs = job_knobs(grad_compression, bucket_mb, zeropp)
    check_zero(zero)
    framework = check_framework(framework)
    check_option(global_batch, "--global-batch")
    check_option(seq_len, "--seq-len")
    spec = load_model(model)
    adapters = peft_of(peft, lora_rank, lora_targets, base_precision, spec)
    resolved = _resolved(system, gpus, nodes, extra or [])
    if resolved.train_fit is not None and resolved.profile is not None:
        if adapters is not None or knobs.active:
            raise UserError("--peft, --grad-compression, --bucket-mb, --zeropp: a profile's fitted step model covers "
                            "plain full training only; use a System")
        prediction = _on_fit(resolved.train_fit, resolved.profile, spec, global_batch, seq_len, dp_overlap, gpus,
                             auto_int(tp, "--tp"), auto_int(dp, "--dp"), zero, recompute)
    else:
        job = training_job(spec, global_batch, seq_len, precision, attention, moe_dispatcher, moe_imbalance,
                           dp_overlap=dp_overlap, tp_overlap=tp_overlap, moe_a2a_overlap=moe_a2a_overlap,
                           peft=adapters, framework=framework, moe_transport=transport_choice(transport),
                           knobs=knobs)
        req = layout_request(tp, pp, dp, cp, interleave, micro_batch, recompute, zero, sequence_parallel, ep, etp)
        prediction = predict_train_on(job, resolved, req)
    if as_json:
        print_json(prediction.as_dict())
    else:
        from linkscope.report.predict import train_table

        console.print(train_table(prediction))
        print_knob_effect(prediction.knobs)


def _on_fit(fit: TrainFit, profile: Profile, spec: ModelConfig, global_batch: int | None, seq_len: int | None,
            dp_overlap: bool | None, gpus: int | None, tp: int | None, dp: int | None, zero: int | None,
            recompute: str) -> TrainPrediction:
    """`predict train` on a profile's step model fitted on CPU ranks: the layout given, nothing searched. The
    model describes `bench train` steps (a micro-batch per rank, no accumulation), so the default batch is that
    step's, not the ~4M tokens of a pre-training job."""
    from linkscope.model.calibration.train_fit import bench_global_batch, predict_on_fit
    from linkscope.traincheck.predict import available_host_gib

    tp_n = tp or 1
    ranks = gpus or profile.ranks
    job = training_job(spec, global_batch or bench_global_batch(ranks, tp_n), seq_len, "bf16",
                       dp_overlap=True if dp_overlap is None else dp_overlap)
    return predict_on_fit(fit, profile.name, job, tp_n, dp or max(ranks // tp_n, 1), zero or 0,
                          "none" if recompute in ("auto", "none") else recompute, available_host_gib())


# The pools of `predict infer --disaggregated`.
_PrefillGpusOpt = typer.Option(None, "--prefill-gpus", help="--disaggregated: GPUs of the prefill pool.")
_DecodeGpusOpt = typer.Option(None, "--decode-gpus", help="--disaggregated: GPUs of the decode pool.")
_PrefillInstancesOpt = typer.Option(None, "--prefill-instances",
                                    help="--disaggregated: prefill instances (instead of GPUs).")
_DecodeInstancesOpt = typer.Option(None, "--decode-instances", help="--disaggregated: decode instances (instead of "
                                                                    "GPUs).")
_PrefillTpOpt = typer.Option(None, "--prefill-tp", help="--disaggregated: TP of a prefill instance (default --tp).")
_DecodeTpOpt = typer.Option(None, "--decode-tp", help="--disaggregated: TP of a decode replica (default --tp).")
_DecodeEpOpt = typer.Option(1, "--decode-ep", help="--disaggregated: wide expert parallelism of the decode pool (MoE "
                                                   "models).")


@predict_app.command("infer")
@user_errors
def infer(
    system: str = SystemOpt,
    model: str = ModelOpt,
    tp: str = tp_opt("1"),
    pp: str = pp_opt("1"),
    batch: int = typer.Option(1, help="Sequences decoded together (per attention replica under --ep)."),
    ep: int = typer.Option(1, "--ep", help="Wide expert parallelism for an MoE model: experts over this many GPUs, "
                                           "attention data-parallel in replicas of tp x pp GPUs (1: experts split "
                                           "by tp)."),
    input_tokens: int = InputTokensOpt,
    output_tokens: int = OutputTokensOpt,
    latency_budget: Optional[float] = LatencyBudgetOpt,
    precision: str = PrecisionOpt,
    prefill_interference: bool = PrefillInterferenceOpt,
    engine: str = EngineOpt,
    transport: str = TransportOpt,
    disaggregated: bool = typer.Option(False, "--disaggregated",
                                       help="Prefill and decode on separate pools, the KV cache between them; "
                                            "beside it colocated serving on the same GPUs."),
    prefill_gpus: Optional[int] = _PrefillGpusOpt, decode_gpus: Optional[int] = _DecodeGpusOpt,
    prefill_instances: Optional[int] = _PrefillInstancesOpt, decode_instances: Optional[int] = _DecodeInstancesOpt,
    prefill_tp: Optional[int] = _PrefillTpOpt, decode_tp: Optional[int] = _DecodeTpOpt,
    decode_ep: int = _DecodeEpOpt,
    kv_transport: str = KvTransportOpt, kv_precision: str = KvPrecisionOpt,
    block_tokens: Optional[int] = BlockTokensOpt, kv_granularity: str = KvGranularityOpt,
    kv_overlap: bool = KvOverlapOpt,
    qps: Optional[float] = typer.Option(None, "--qps", help="--disaggregated: requests/s to price the queues at "
                                                            "(default: 80% of the smaller capacity)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="--disaggregated: nodes of the System the pools share."),
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Prefill time, per-token decode time, tokens/s per GPU and per user, and the TP all-reduce share."""
    from linkscope.cli.disagg_cmd import check_disaggregated_only

    check_disaggregated_only(disaggregated, {
        "--prefill-gpus": prefill_gpus is not None, "--decode-gpus": decode_gpus is not None,
        "--prefill-instances": prefill_instances is not None, "--decode-instances": decode_instances is not None,
        "--prefill-tp": prefill_tp is not None, "--decode-tp": decode_tp is not None, "--decode-ep": decode_ep != 1,
        "--kv-transport": kv_transport != "auto", "--kv-precision": kv_precision != "bf16",
        "--block-tokens": block_tokens is not None, "--kv-granularity": kv_granularity != "request",
        "--kv-overlap": kv_overlap, "--qps": qps is not None, "--nodes": nodes is not None})
    for flag, value in (("--batch", batch), ("--input-tokens", input_tokens), ("--output-tokens", output_tokens)):
        check_option(value, flag)
    check_option(latency_budget, "--latency-budget")
    if disaggregated:
        from linkscope.cli.disagg_cmd import DisaggArgs, PoolArgs, kv_options, predict_disaggregated

        base_tp = auto_int(tp, "--tp")
        if base_tp is None:
            raise UserError("--tp auto: --disaggregated prices the pools given; `advise infer --disaggregated` "
                            "searches them")
        args = DisaggArgs(system, nodes, PoolArgs("prefill", prefill_gpus, prefill_instances, prefill_tp or base_tp),
                          PoolArgs("decode", decode_gpus, decode_instances, decode_tp or base_tp, decode_ep),
                          kv_options(kv_transport, block_tokens, kv_granularity, kv_overlap), kv_precision, qps)
        predict_disaggregated(args, load_model(model), input_tokens, output_tokens, precision, engine,
                              None if latency_budget is not None else batch, latency_budget, as_json, extra or [])
        return
    job, resolved, tp_given = _infer_job(system, model, tp, pp, ep, (input_tokens, output_tokens),
                                         (precision, engine, transport), extra or [])
    pick = _infer_pick(job, resolved, tp_given, None if latency_budget is not None else batch, latency_budget,
                       prefill_interference)
    if pick.index is None:
        raise UserError(f"no batch meets {latency_budget:g} tokens/s per user on {system} with tp {pick.job.tp}: "
                        f"even one sequence gets {float(pick.est.tokens_per_s_per_user[0]):.1f}")
    from linkscope.model.step.infer import summary

    data = summary(pick.job, resolved.system, pick.est, pick.index)
    if as_json:
        print_json({**data, "latency_budget": latency_budget})
    else:
        from linkscope.report.predict import infer_table

        console.print(infer_table(data, latency_budget))


def _infer_job(system: str, model: str, tp: str, pp: str, ep: int, tokens: tuple[int, int],
               formats: tuple[str, str, str], extra: list[Path]) -> tuple[InferJob, ResolvedSystem, bool]:
    """The serving job as the options give it, the System it runs on (enough nodes for --ep) and whether --tp
    was given (not auto). `tokens`: input and output tokens; `formats`: precision, engine and MoE transport."""
    from linkscope.model.step.infer import InferJob, check_experts_fit

    tp_size, pp_size = auto_int(tp, "--tp"), auto_int(pp, "--pp")
    if pp_size is None:
        raise UserError("--pp auto: inference pipelines are not searched; give a size (1 keeps the model in one node)")
    check_option(ep, "--ep")
    per_node = _resolved(system, None, 1, extra).system.node.gpus
    if ep > per_node and ep % per_node:
        raise UserError(f"--ep {ep} does not fill whole nodes of {per_node} GPUs on {system}")
    resolved = _resolved(system, ep if ep > per_node else None, None, extra)
    precision, engine, transport = formats
    job = InferJob(model=load_model(model), tp=tp_size or 1, pp=pp_size, input_tokens=tokens[0],
                   output_tokens=tokens[1], precision=choice(precision, "--precision", PRECISIONS), ep=ep,
                   engine=choice(engine, "--engine", ENGINES), moe_transport=transport_choice(transport))
    check_experts_fit(job, resolved.system)
    if job.precision == "fp8" and resolved.system.node.gpu.fp8_dense_tflops is None:
        raise UserError(f"--precision fp8: {resolved.system.node.gpu.id} has no FP8 tensor cores (use bf16)")
    return job, resolved, tp_size is not None


def _infer_pick(job: InferJob, resolved: ResolvedSystem, tp_given: bool, batch: int | None,
                latency_budget: float | None, prefill_interference: bool) -> InferPick:
    """The batch (and, with --tp auto, the TP size) to report: the given batch, or under a budget the largest
    that meets it (`index` None: none does)."""
    import numpy as np

    from linkscope.model.step.infer import (InferPick, best_batch_for_budget, candidate_batches, estimate_inference,
                                            pick_tp)

    batches = None if batch is None else np.asarray([batch])
    if not tp_given:
        return pick_tp(job, resolved.system, batches, latency_budget, resolved.tiers, prefill_interference)
    est = estimate_inference(job, resolved.system, candidate_batches(job, resolved.system) if batches is None
                             else batches, resolved.tiers, prefill_interference)
    return InferPick(job, est, best_batch_for_budget(est, latency_budget) if latency_budget is not None else 0)


@predict_app.command("scaling")
@user_errors
def scaling(
    system: str = SystemOpt,
    model: str = ModelOpt,
    nodes: int = typer.Option(8, help="Largest node count (1, 2, 4, ... up to it)."),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", help="Sequences per step of the whole job "
                                               "at the largest node count (default: ~4M tokens); weak scaling "
                                               "gives smaller counts their share."),
    seq_len: Optional[int] = SeqLenOpt,
    tp: Optional[str] = tp_opt(),
    pp: Optional[str] = pp_opt(),
    strong: bool = typer.Option(False, "--strong", help="Keep the global batch fixed at every node count."),
    precision: str = PrecisionOpt,
    peft: Optional[str] = PeftOpt,
    lora_rank: int = LoraRankOpt,
    lora_targets: str = LoraTargetsOpt,
    base_precision: str = BasePrecisionOpt,
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Speedup and scaling efficiency from one node to N nodes for a training job."""
    from linkscope.model.step.scaling import predict_scaling

    check_option(nodes, "--nodes")
    check_option(global_batch, "--global-batch")
    check_option(seq_len, "--seq-len")
    resolved = _resolved(system, None, 1, extra or [])
    spec = load_model(model)
    job = training_job(spec, global_batch, seq_len, precision,
                       peft=peft_of(peft, lora_rank, lora_targets, base_precision, spec))
    points, note = predict_scaling(job, resolved, nodes, LayoutRequest(tp=auto_int(tp, "--tp"),
                                                                       pp=auto_int(pp, "--pp")), strong)
    note = "; ".join([note, *resolved.training_notes])
    if as_json:
        print_json({"system": system, "model": spec.id, "note": note, "points": [p.as_dict() for p in points]})
    else:
        from linkscope.report.predict import scaling_reasons, scaling_table

        mode = "strong" if strong else "weak"
        title = (f"{spec.id} on {system} ({mode} scaling, global batch {job.global_batch} x seq len {job.seq_len} "
                 f"at {nodes} node{'s' if nodes > 1 else ''})")
        console.print(scaling_table(points, title, console.width))
        for line in [*scaling_reasons(points), note]:
            console.print(line, highlight=False, markup=False, soft_wrap=True)


@predict_app.command("moe")
@user_errors
def moe(
    system: str = SystemOpt,
    ep: int = typer.Option(..., help="Expert-parallel ranks (GPUs); beyond one node means several nodes."),
    tokens_per_rank: int = typer.Option(..., help="Tokens each rank routes per dispatch."),
    hidden: int = typer.Option(..., help="Hidden size of a token."),
    topk: int = typer.Option(..., help="Experts each token is routed to."),
    experts: int = typer.Option(..., help="Routed experts, sharded evenly over the --ep ranks."),
    precision: str = typer.Option("fp8", help="Dispatch precision: fp8 (with its 1x128 scales) or bf16; combine "
                                              "is always bf16."),
    kernel: str = typer.Option("deepep-normal", help="deepep-normal or uccl-ep-normal (hierarchical RDMA then NVLink "
                                                     "forwarding, for training and prefill), deepep-ll, uccl-ep-ll or "
                                                     "pplx (direct per-expert messages, for decode), nccl (an "
                                                     "all-to-allv); normal and low-latency name DeepEP's."),
    transport: str = TransportOpt,
    max_nodes_per_token: Optional[int] = typer.Option(None, help="Node-limited routing: a token reaches at most "
                                                                 "this many nodes (DeepSeek-V3: 4)."),
    imbalance: float = typer.Option(1.0, help="Routing imbalance: the busiest rank's tokens over the mean (>= 1)."),
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """One MoE dispatch and combine on EP ranks. Bandwidth follows DeepEP's convention: inside the NVLink domain,
    bytes of token copies a rank receives over the time; across nodes, bytes counted once per destination node
    (the sender's own included) over the time."""
    from linkscope.model.comm.moe import MOE_PRECISIONS, MoeRequest, check_request, predict_moe

    req = MoeRequest(ep=ep, tokens_per_rank=tokens_per_rank, hidden=hidden, topk=topk, experts=experts,
                     precision=choice(precision, "--precision", MOE_PRECISIONS), kernel=kernel,
                     max_nodes_per_token=max_nodes_per_token, imbalance=imbalance, transport=transport)
    check_request(req)
    per_node = _resolved(system, None, 1, extra or []).system.node.gpus
    if ep > per_node and ep % per_node:
        raise UserError(f"--ep {ep} does not fill whole nodes of {per_node} GPUs on {system}")
    resolved = _resolved(system, ep, None, extra or [])
    prediction = predict_moe(resolved.tiers, req)
    if as_json:
        print_json(prediction.as_dict())
    else:
        from linkscope.report.predict import moe_table

        console.print(moe_table(prediction, f"MoE {prediction.kernel} over {prediction.transport} on {system}: ep {ep} "
                                            f"({prediction.nodes} node"
                                            f"{'s' * (prediction.nodes > 1)}), {tokens_per_rank} tokens x top-"
                                            f"{topk} of {experts} experts, hidden {hidden}, {precision} dispatch"))
        console.print(f"{prediction.ranks_per_token:.2f} ranks and {prediction.nodes_per_token:.2f} nodes per token",
                      highlight=False)
        console.print(f"transport {prediction.transport} ({prediction.transport_reason})"
                      + (f"; {prediction.peer_us:.0f} us of each is per-peer cost" if prediction.peer_us else ""),
                      highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `predict` and its subcommands."""
    app.add_typer(predict_app, name="predict")
