"""`linkscope predict collective|train|infer|scaling`: parse, call the model, print."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import typer

from linkscope.bench.sizes import parse_size
from linkscope.cli.common import console, print_json, user_errors
from linkscope.cli.options import CatalogOpt, check_option
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.collective_predict import predict_from_profile, predict_sizes
from linkscope.model.infer import InferJob, best_batch_for_budget, estimate_inference, summary
from linkscope.model.predict_train import predict_train
from linkscope.model.profiles import Profile, load_profile
from linkscope.model.scaling import predict_scaling
from linkscope.model.search import LayoutRequest
from linkscope.model.systems import resolve_with_profiles, split_profile
from linkscope.model.train import Job
from linkscope.model.train_fit import TrainFit, predict_on_fit
from linkscope.model.transformer import load_model
from linkscope.report.predict import collective_table, infer_table, scaling_table, train_table

predict_app = typer.Typer(help="Predict collectives, training steps, inference and scaling on any System.",
                          no_args_is_help=True)

SystemOption = typer.Option(..., "--system", "-s", help="Preset, offering (provider/instance), YAML file or "
                                                        "profile:NAME.")
PRECISIONS = ("bf16", "fp16", "fp8")


def auto_int(value: str | None, flag: str) -> int | None:
    """`auto` (or nothing) -> None, else a positive integer."""
    if value is None or value == "auto":
        return None
    try:
        number = int(value)
    except ValueError:
        raise UserError(f"{flag}: expected a positive integer or 'auto', got '{value}'") from None
    if number < 1:
        raise UserError(f"{flag}: must be at least 1 (got {number})")
    return number


MAX_BYTES = 1 << 50


def _choice(value: str, flag: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UserError(f"{flag}: '{value}' is not one of {', '.join(choices)}")
    return value


@predict_app.command("collective")
@user_errors
def collective(
    system: str = SystemOption,
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
    nbytes = parse_size(size, "--bytes")
    if nbytes > MAX_BYTES:
        raise UserError(f"--bytes must be at most {MAX_BYTES} (1 PiB) (got {nbytes})")
    check_option(gpus, "--gpus")
    sizes = [1 << k for k in range(3, nbytes.bit_length()) if (1 << k) < nbytes] + [nbytes] if sweep else [nbytes]
    name = split_profile(system)
    if name is not None:
        rows = predict_from_profile(load_profile(name), op, sizes, gpus)
    else:
        resolved, tiers, _ = resolve_with_profiles(system, load_db(extra or []))
        rows = predict_sizes(resolved, op, sizes, gpus, algo, tiers)
    if as_json:
        print_json([r.as_dict() for r in rows] if sweep else rows[0].as_dict())
    else:
        console.print(collective_table(rows, f"{op} on {system}, {rows[0].gpus} GPUs, {rows[0].nodes} node(s)"))


def _sized_system(spec: str, gpus: int | None, nodes: int | None, extra: list[Path]):  # type: ignore[no-untyped-def]
    system, tiers, profile = resolve_with_profiles(spec, load_db(extra))
    if gpus is not None and nodes is not None:
        raise UserError("give --gpus or --nodes, not both")
    check_option(gpus, "--gpus")
    check_option(nodes, "--nodes")
    if nodes is not None:
        system = system.with_nodes(nodes)
    elif gpus is not None:
        try:
            system = system.with_gpus(gpus)
        except ValueError as exc:
            raise UserError(f"--gpus: {exc}") from None
    if system.max_nodes is not None and system.nodes > system.max_nodes:
        raise UserError(f"{spec} can be booked as at most {system.max_nodes} node(s), not {system.nodes}")
    return system, tiers


@predict_app.command("train")
@user_errors
def train(
    system: str = SystemOption,
    model: str = typer.Option(..., "--model", "-m", help="Preset (llama2-70b, gpt3-175b, ...) or YAML/JSON file."),
    gpus: Optional[int] = typer.Option(None, help="GPUs in all (whole nodes beyond one node)."),
    nodes: Optional[int] = typer.Option(None, help="Nodes of the System."),
    tp: Optional[str] = typer.Option(None, help="Tensor parallel size or auto."),
    pp: Optional[str] = typer.Option(None, help="Pipeline parallel size or auto."),
    dp: Optional[str] = typer.Option(None, help="Data parallel size or auto."),
    cp: str = typer.Option("1", help="Context parallel size or auto."),
    interleave: Optional[str] = typer.Option(None, help="Pipeline chunks per stage, or auto."),
    micro_batch: Optional[str] = typer.Option(None, help="Sequences per micro-batch, or auto."),
    global_batch: int = typer.Option(..., help="Sequences per step (the whole global batch)."),
    seq_len: Optional[int] = typer.Option(None, help="Tokens per sequence (default: the model's)."),
    recompute: str = typer.Option("auto", help="auto, full, selective or none."),
    sequence_parallel: Optional[bool] = typer.Option(None, "--sequence-parallel/--no-sequence-parallel",
                                                     help="Megatron sequence parallelism (default: on with TP)."),
    zero: Optional[int] = typer.Option(None, help="ZeRO stage 0-3 (default: searched)."),
    precision: str = typer.Option("bf16", help="bf16, fp16 or fp8 (GEMMs)."),
    attention: str = typer.Option("flash", help="flash (fused) or unfused (scores materialised)."),
    dp_overlap: bool = typer.Option(True, "--dp-overlap/--no-dp-overlap",
                                    help="Overlap the data-parallel gradient reduction with the last backward "
                                         "pass (Megatron --overlap-grad-reduce)."),
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Step time, throughput, MFU, memory per GPU and where the time goes; `auto` values are searched."""
    if zero is not None and zero not in (0, 1, 2, 3):
        raise UserError(f"--zero: must be 0, 1, 2 or 3 (got {zero})")
    check_option(global_batch, "--global-batch")
    check_option(seq_len, "--seq-len")
    spec = load_model(model)
    fitted = _train_fit(system)
    if fitted is not None:
        job = Job(model=spec, global_batch=global_batch, seq_len=seq_len if seq_len is not None else spec.seq_len,
                  precision="bf16", dp_overlap=dp_overlap)
        tp_n = auto_int(tp, "--tp") or 1
        ranks = gpus or fitted[1].ranks
        prediction = predict_on_fit(fitted[0], fitted[1].name, job, tp_n, auto_int(dp, "--dp") or max(ranks // tp_n, 1),
                                    zero or 0, "none" if recompute in ("auto", "none") else recompute)
        if as_json:
            print_json(prediction.as_dict())
        else:
            console.print(train_table(prediction))
        return
    resolved, tiers = _sized_system(system, gpus, nodes, extra or [])
    job = Job(model=spec, global_batch=global_batch, seq_len=seq_len if seq_len is not None else spec.seq_len,
              precision=_choice(precision, "--precision", PRECISIONS),
              attention=_choice(attention, "--attention", ("flash", "unfused")), dp_overlap=dp_overlap)
    req = LayoutRequest(tp=auto_int(tp, "--tp"), pp=auto_int(pp, "--pp"), dp=auto_int(dp, "--dp"),
                        cp=auto_int(cp, "--cp"), interleave=auto_int(interleave, "--interleave"),
                        micro_batch=auto_int(micro_batch, "--micro-batch"),
                        recompute=None if recompute == "auto" else _choice(recompute, "--recompute",
                                                                             ("full", "selective", "none")),
                        zero=zero, sequence_parallel=sequence_parallel)
    prediction = predict_train(job, resolved, req, tiers)
    if as_json:
        print_json(prediction.as_dict())
    else:
        console.print(train_table(prediction))


def _train_fit(spec: str) -> tuple[TrainFit, Profile] | None:
    """The training calibration of `profile:NAME`, when the profile has one."""
    name = split_profile(spec)
    if name is None:
        return None
    profile = load_profile(name)
    return (TrainFit.from_dict(profile.train), profile) if profile.train is not None else None


@predict_app.command("infer")
@user_errors
def infer(
    system: str = SystemOption,
    model: str = typer.Option(..., "--model", "-m"),
    tp: int = typer.Option(1, help="Tensor parallel size."),
    pp: int = typer.Option(1, help="Pipeline parallel size."),
    batch: int = typer.Option(1, help="Sequences decoded together."),
    input_tokens: int = typer.Option(..., help="Prompt tokens per sequence."),
    output_tokens: int = typer.Option(..., help="Generated tokens per sequence."),
    latency_budget: Optional[float] = typer.Option(None, help="Tokens/s each user must see: finds the largest "
                                                              "batch that meets it."),
    precision: str = typer.Option("bf16", help="bf16, fp16 or fp8 (weights and GEMMs)."),
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Prefill time, per-token decode time, tokens/s per GPU and per user, and the TP all-reduce share."""
    for flag, value in (("--tp", tp), ("--pp", pp), ("--batch", batch), ("--input-tokens", input_tokens),
                        ("--output-tokens", output_tokens)):
        if value < 1:
            raise UserError(f"{flag} must be at least 1 (got {value})")
        check_option(value, flag)
    check_option(latency_budget, "--latency-budget")
    resolved, _ = _sized_system(system, None, None, extra or [])
    job = InferJob(model=load_model(model), tp=tp, pp=pp, input_tokens=input_tokens, output_tokens=output_tokens,
                   precision=_choice(precision, "--precision", PRECISIONS))
    batches = np.arange(1, 4097) if latency_budget is not None else np.asarray([batch])
    est = estimate_inference(job, resolved, batches)
    index = best_batch_for_budget(est, latency_budget) if latency_budget is not None else 0
    if index is None:
        raise UserError(f"no batch meets {latency_budget:g} tokens/s per user on {system} with tp {tp}: even one "
                        f"sequence gets {float(est.tokens_per_s_per_user[0]):.1f}")
    data = summary(job, resolved, est, index)
    if as_json:
        print_json({**data, "latency_budget": latency_budget})
    else:
        console.print(infer_table(data, latency_budget))


@predict_app.command("scaling")
@user_errors
def scaling(
    system: str = SystemOption,
    model: str = typer.Option(..., "--model", "-m"),
    nodes: int = typer.Option(8, help="Largest node count (1, 2, 4, ... up to it)."),
    global_batch: int = typer.Option(..., help="Sequences per step on one node (weak scaling multiplies it)."),
    seq_len: Optional[int] = typer.Option(None),
    tp: Optional[str] = typer.Option(None, help="Tensor parallel size or auto."),
    pp: Optional[str] = typer.Option(None, help="Pipeline parallel size or auto."),
    strong: bool = typer.Option(False, "--strong", help="Keep the global batch fixed instead."),
    precision: str = typer.Option("bf16"),
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Speedup and scaling efficiency from one node to N nodes for a training job."""
    check_option(nodes, "--nodes")
    check_option(global_batch, "--global-batch")
    check_option(seq_len, "--seq-len")
    resolved, tiers = _sized_system(system, None, 1, extra or [])
    spec = load_model(model)
    job = Job(model=spec, global_batch=global_batch, seq_len=seq_len if seq_len is not None else spec.seq_len,
              precision=_choice(precision, "--precision", PRECISIONS))
    points, note = predict_scaling(job, resolved, nodes, LayoutRequest(tp=auto_int(tp, "--tp"),
                                                                       pp=auto_int(pp, "--pp")), strong, tiers)
    if as_json:
        print_json({"system": system, "model": spec.id, "note": note, "points": [p.__dict__ for p in points]})
    else:
        mode = "strong" if strong else "weak"
        title = (f"{spec.id} on {system} ({mode} scaling, global batch {global_batch} x seq len {job.seq_len} "
                 f"tokens on one node)")
        console.print(scaling_table(points, title))
        console.print(note)


def register(app: typer.Typer) -> None:
    """Add `predict` and its subcommands."""
    app.add_typer(predict_app, name="predict")
