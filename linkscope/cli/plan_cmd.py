"""`linkscope plan`: lay a job's ranks on a System and print what launchers need. Parsing and printing only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from linkscope.advise.launch import LaunchPlan, host_names, launch_plan
from linkscope.advise.placement import Parallelism, parse_order
from linkscope.advise.plan import OrderCost, PlanRequest, PlanResult, make_plan, searched_parallelism
from linkscope.cli.common import console, print_json, user_errors
from linkscope.cli.knob_output import print_knob_effect
from linkscope.cli.options import (AttentionOpt, BasePrecisionOpt, BucketMbOpt, GradCompressionOpt, ZeroppOpt,
                                   job_knobs, DpOverlapOpt, EpOpt, EtpOpt, FrameworkOpt,
                                   GlobalBatchOpt, InterleaveOpt, LoraRankOpt, LoraTargetsOpt, MicroBatchOpt,
                                   MoeA2aOverlapOpt, MoeDispatcherOpt, MoeImbalanceOpt, PeftOpt, PrecisionOpt,
                                   RecomputeOpt, SeqLenOpt, SequenceParallelOpt, SystemOpt, TpOverlapOpt, ZeroOpt,
                                   check_framework, check_option, layout_request, peft_of, pp_opt, tp_opt,
                                   training_job)
from linkscope.hardware.errors import UserError, check_output_path, write_output
from linkscope.hardware.loader import load_db
from linkscope.model.calibration.systems import ResolvedSystem, resolve
from linkscope.model.step.predict import with_knobs
from linkscope.model.step.job import Job
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.transformer import load_model
from linkscope.report.advise import groups_table, launch_text, plan_summary, rank_map_table

MAP_NODES = 4
"""Nodes drawn in the rank map and launch lines on the terminal; --json always has all of them."""


def _parallelism(resolved: ResolvedSystem, nodes: int, job: Job | None, given: LayoutRequest) -> Parallelism:
    """The degrees as given; `auto` ones searched by the step model, which needs --model."""
    if None not in (given.tp, given.pp, given.dp, given.cp):
        return Parallelism(tp=given.tp or 1, pp=given.pp or 1, dp=given.dp or 1, cp=given.cp or 1)
    if job is None:
        raise UserError("--tp/--pp/--dp/--cp auto needs --model to search a layout; give every size, or --model")
    check_option(nodes, "--nodes")
    return searched_parallelism(resolved, nodes, job, given)


def _groups(cost: OrderCost) -> dict[str, Any]:
    return {g: c.as_dict() for g, c in cost.groups.items()}


def _json(result: PlanResult, hosts: list[str]) -> dict[str, Any]:
    p, megatron = result.placement, result.megatron_cost
    return {
        "system": p.system.id, "nodes": p.system.nodes, "gpus_per_node": p.system.node.gpus,
        "parallelism": dict(p.par.__dict__), "order": p.order_text, "order_reason": result.order_reason,
        "baseline_order": result.baseline.order_text, "basis": result.basis,
        "step_time_s": result.step_time_s, "baseline_step_time_s": result.baseline_step_time_s,
        "predict_train": None if megatron is None else {"order": megatron.order, "step_time_s": megatron.step_time_s,
                                                        "groups": _groups(megatron)},
        "moves_s": result.moves(),
        "layout": result.layout.as_dict() if result.layout else None, "framework": result.framework,
        "ranks": p.rank_rows(),
        "groups": _groups(result.cost), "baseline_groups": _groups(result.baseline_cost),
        "rails": {k: {"cross_node_pairs": v[0], "same_rail": v[1]} for k, v in result.rails().items()},
        "launch": launch_plan(p, hosts).as_dict(), "notes": result.notes,
    }


@user_errors
def plan(
    system: str = SystemOpt,
    nodes: int = typer.Option(..., "--nodes", help="Nodes of that System."),
    tp: str = tp_opt("auto"),
    pp: str = pp_opt("auto"),
    dp: str = typer.Option("auto", "--dp", help="Data parallel size or auto (default: searched)."),
    cp: str = typer.Option("1", "--cp", help="Context parallel size or auto."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model preset or file: predicts step times and "
                                        "searches auto sizes (else bytes-only comparison)."),
    seq_len: Optional[int] = SeqLenOpt,
    global_batch: Optional[int] = GlobalBatchOpt,
    interleave: Optional[str] = InterleaveOpt,
    micro_batch: Optional[str] = MicroBatchOpt,
    recompute: str = RecomputeOpt,
    sequence_parallel: Optional[bool] = SequenceParallelOpt,
    zero: Optional[int] = ZeroOpt,
    ep: Optional[str] = EpOpt,
    etp: str = EtpOpt,
    moe_dispatcher: str = MoeDispatcherOpt,
    moe_a2a_overlap: bool = MoeA2aOverlapOpt,
    moe_imbalance: float = MoeImbalanceOpt,
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
    order: Optional[str] = typer.Option(None, "--order", help="Force a rank order, fastest first: tp-cp-dp-pp."),
    baseline: Optional[str] = typer.Option(None, "--baseline-order", help="Compare against this order "
                                           "(default TP slowest-varying)."),
    hosts: Optional[str] = typer.Option(None, "--hosts", help="Host names, comma-separated, one per node."),
    hostfile: Optional[Path] = typer.Option(None, "--write-hostfile", help="Also write the hostfile here."),
    as_json: bool = typer.Option(False, "--json", help="JSON with every rank instead of tables."),
    extra: Optional[list[Path]] = typer.Option(None, "--catalog", help="Extra data file(s)."),
) -> None:
    """Place ranks on a topology; print the rank map, launcher inputs and what it saves over a naive placement.

    TP goes inside NVLink domains, PP on rails, DP across nodes."""
    check_output_path(hostfile, "--write-hostfile")
    for flag, value in (("--nodes", nodes), ("--seq-len", seq_len), ("--global-batch", global_batch)):
        check_option(value, flag)
    framework = check_framework(framework)
    given = layout_request(tp, pp, dp, cp, interleave, micro_batch, recompute, zero, sequence_parallel, ep, etp)
    knobs = job_knobs(grad_compression, bucket_mb, zeropp)
    resolved = resolve(system, load_db(extra or []))
    job = None
    if model is not None:
        spec = load_model(model)
        job = training_job(spec, global_batch, seq_len, precision, attention, moe_dispatcher, moe_imbalance,
                           dp_overlap=dp_overlap, tp_overlap=tp_overlap, moe_a2a_overlap=moe_a2a_overlap,
                           peft=peft_of(peft, lora_rank, lora_targets, base_precision, spec),
                           framework=framework, knobs=knobs)
        job, given = with_knobs(job, given)
    elif peft is not None:
        raise UserError("--peft needs --model: the adapters are sized from the model")
    elif knobs.active:
        raise UserError("--grad-compression, --bucket-mb, --zeropp need --model: the gradients are sized from it")
    request = PlanRequest(system=resolved, nodes=nodes, par=_parallelism(resolved, nodes, job, given),
                          order=parse_order(order) if order else None,
                          baseline_order=parse_order(baseline, "--baseline-order") if baseline else None,
                          job=job, given=given)
    result = make_plan(request)
    names = host_names(hosts, nodes)
    launch = launch_plan(result.placement, names)
    if hostfile is not None:
        write_output(hostfile, launch.hostfile, "--write-hostfile")
    effect = _knob_effect(job, resolved, nodes, result)
    if as_json:
        print_json({**_json(result, names), "knobs": effect})
        return
    _print_plan(result, request.par, launch)
    print_knob_effect(effect)


def _knob_effect(job: Job | None, resolved: ResolvedSystem, nodes: int, result: PlanResult) -> dict[str, Any] | None:
    """What the job's communication knobs change in the planned layout's step (None: no knob is on)."""
    if job is None or not job.knobs.active or result.layout is None:
        return None
    from linkscope.model.step.knob_effect import knob_effect

    sized = resolved.with_nodes(nodes)
    with sized.computing():
        return knob_effect(job, sized.system, result.layout, sized.tiers).as_dict()


def _print_plan(result: PlanResult, par: Parallelism, launch: LaunchPlan) -> None:
    system = result.placement.system
    tp, pp, dp, cp = (par.size(d) for d in ("tp", "pp", "dp", "cp"))
    console.print(f"[bold]{system.id}[/]: {system.nodes} node{'s' if system.nodes > 1 else ''} x "
                  f"{system.node.gpus} GPUs, tp {tp} x pp {pp} x dp {dp} x cp {cp}", highlight=False)
    console.print(rank_map_table(result.placement, MAP_NODES))
    console.print(groups_table(result))
    console.print(plan_summary(result), highlight=False)
    # Commands stay on one line each so they can be copied.
    console.print(launch_text(launch, MAP_NODES), highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `plan` to the command line."""
    app.command("plan")(plan)
