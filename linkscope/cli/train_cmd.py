"""`linkscope bench train`: a real training loop, measured beside its prediction. Parsing and printing only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from linkscope.bench.train.config import DEFAULT_MICRO_BATCH
from linkscope.cli.common import console, err_console, print_json, user_errors
from linkscope.cli.options import BackendOpt, LabelOpt, NprocOpt, OversubscribeOpt, RunDbOpt, TimeoutOpt

if TYPE_CHECKING:
    from linkscope.traincheck.session import TrainOutcome

TRAIN_HELP = "\n\n".join((
    "Train a Llama-style decoder on synthetic tokens on every local rank (or under torchrun) and print step time, "
    "tokens/s, TFLOPS per rank, MFU and peak memory beside the prediction for the same layout, with the error.",
    "--model takes what `predict train` takes (a preset or a YAML/JSON file); --layers/--hidden/--vocab/--seq-len "
    "scale it down for a small machine; --experts E --topk K make its MLPs routed experts, sharded over the ranks "
    "with --ep (tokens dispatched and combined with all_to_all_single). A few steps after the timed ones are "
    "traced with torch.profiler: the "
    "trace files are kept, and the time of each collective kind and the part not overlapped by compute "
    "(HolisticTraceAnalysis's definition) are printed per rank.",
    "Exit codes: 0 ok; 2 bad option, invalid layout, or a model that cannot fit (stopped before allocating); "
    "3 a rank died, hung past --timeout, or the run was interrupted; the steps measured so far are then stored "
    "with status incomplete.",
))


@user_errors
def train(
    model: str = typer.Option(..., "--model", "-m", help="Preset (llama2-7b, ...) or YAML/JSON model file."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Use this many layers instead of the model's."),
    hidden: Optional[int] = typer.Option(None, "--hidden", help="Use this width (heads keep their width)."),
    heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads (with --hidden)."),
    vocab: Optional[int] = typer.Option(None, "--vocab", help="Use this vocabulary size."),
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="Tokens per sequence."),
    micro_batch: int = typer.Option(DEFAULT_MICRO_BATCH, "--micro-batch", help="Sequences per rank per step."),
    iters: int = typer.Option(10, "-n", "--iters", help="Timed steps per repeat."),
    warmup: int = typer.Option(3, "-w", "--warmup", help="Untimed steps before timing."),
    repeat: int = typer.Option(1, "--repeat", help="Whole runs of warmup + iters."),
    dp: Optional[int] = typer.Option(None, "--dp", help="Data-parallel replicas; ranks = dp x tp (or --nproc)."),
    fsdp: bool = typer.Option(False, "--fsdp", help="FSDP2 (fully_shard), ZeRO-3 unless --zero says otherwise."),
    zero: int = typer.Option(0, "--zero", help="1, 2 or 3: FSDP2 sharding stage (0 = DDP)."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks (torch.distributed.tensor.parallel)."),
    experts: Optional[int] = typer.Option(None, "--experts", help="Make the MLPs routed experts (MoE), this many."),
    topk: Optional[int] = typer.Option(None, "--topk", help="Experts each token is routed to (with --experts)."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel ranks: 1, or the rank count (experts sharded, tokens "
                                          "moved with all_to_all_single)."),
    bucket_mb: float = typer.Option(25.0, "--bucket-mb", help="DDP gradient bucket size (MB)."),
    no_overlap: bool = typer.Option(False, "--no-overlap", help="Reduce gradients after backward, not during."),
    grad_compression: str = typer.Option("none", "--grad-compression", help="none, fp16, bf16 or powersgd."),
    comm_hook: Optional[str] = typer.Option(None, "--comm-hook", help="PyTorch DDP communication hook: fp16, bf16 "
                                                                      "or powersgd:RANK (default_hooks / "
                                                                      "powerSGD_hook)."),
    recompute: str = typer.Option("none", "--recompute", help="none or full (activation checkpointing)."),
    precision: str = typer.Option("auto", "--precision", help="auto (fp32 on CPU, bf16 on GPUs), bf16 or fp16."),
    lora: int = typer.Option(0, "--lora", help="LoRA adapters of this rank on a frozen base (0 = full training)."),
    lora_targets: str = typer.Option("attn", "--lora-targets", help="attn, attn-mlp or all (with --lora)."),
    profile_steps: int = typer.Option(3, "--profile-steps", help="Steps traced after the timed ones (0 = none)."),
    system: Optional[str] = typer.Option(None, "--system", "-s", help="Predict on this System or profile:NAME "
                                                                      "(default: the probed one on GPUs)."),
    sweep: Optional[str] = typer.Option(None, "--sweep", help="Compare settings: bucket-mb=1,25,100 or "
                                                              "grad-compression=none,fp16,powersgd."),
    scaling: Optional[str] = typer.Option(None, "--scaling", help="Rank counts, e.g. 1,2,4: same per-rank work "
                                                                  "(under torchrun, on the job's first ranks)."),
    backend: str = BackendOpt,
    nproc: Optional[int] = NprocOpt,
    oversubscribe: bool = OversubscribeOpt,
    timeout: float = TimeoutOpt,
    label: str = LabelOpt,
    db: Optional[str] = RunDbOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of the text."),
    quiet: bool = typer.Option(False, "--quiet", help="No per-step lines."),
) -> None:
    from linkscope.bench.config import RunOptions
    from linkscope.bench.train.config import TrainConfig
    from linkscope.hardware.errors import UserError
    from linkscope.model.step.scaled import scaled_model, with_experts
    from linkscope.model.step.transformer import load_model
    from linkscope.traincheck.session import TrainRequest, run_request

    for flag, given in (("--nproc", nproc), ("--dp", dp)):
        if given is not None and given < 1:  # 0 is not "the default": leave the option out for that
            raise UserError(f"{flag} must be at least 1, got {given}")
    if dp is not None and nproc is not None and dp * tp != nproc:
        raise UserError(f"--dp {dp} x --tp {tp} is {dp * tp} ranks, but --nproc is {nproc}; give one of --dp and "
                        "--nproc")
    from linkscope.bench.train.config import missing_hook, parse_comm_hook

    powersgd_rank = 1
    if comm_hook is not None:
        if grad_compression != "none":
            raise UserError("give one of --comm-hook and --grad-compression")
        grad_compression, powersgd_rank = parse_comm_hook(comm_hook)
    spec = with_experts(scaled_model(load_model(model), layers=layers, hidden=hidden, heads=heads, vocab=vocab,
                                     seq_len=seq_len), experts, topk)
    lacking = missing_hook(grad_compression, backend, spec.total_params() * 4 / 2**20, bucket_mb)
    if lacking:
        raise UserError(f"{'--comm-hook ' + comm_hook if comm_hook else '--grad-compression ' + grad_compression}: "
                        f"{lacking}")
    run = RunOptions(backend=backend, nproc=nproc or (dp * tp if dp else None), timeout_s=timeout, label=label,
                     db_path=db, quiet=quiet or as_json, oversubscribe=oversubscribe)
    cfg = TrainConfig(model=spec, micro_batch=micro_batch, iters=iters, warmup=warmup, repeat=repeat, fsdp=fsdp,
                      zero=zero, tp=tp, bucket_mb=bucket_mb, overlap=not no_overlap,
                      grad_compression=grad_compression, powersgd_rank=powersgd_rank, recompute=recompute,
                      precision=precision,
                      profile_steps=profile_steps, lora_rank=lora, lora_targets=lora_targets, ep=ep, run=run)
    outcome = run_request(TrainRequest(cfg, system, sweep, scaling))
    _print(outcome, as_json)


def _print(outcome: TrainOutcome, as_json: bool) -> None:
    from linkscope.report.train import point_lines, scaling_lines, sweep_lines

    result = outcome.result
    if not result.run_id:  # a torchrun rank other than 0: rank 0 reports
        raise typer.Exit(result.exit_code)
    if as_json:
        print_json(outcome.as_dict())
    else:
        lines: list[str] = []
        for doc in outcome.documents:
            lines += [f"# {doc['label']}"] * bool(doc["label"]) + point_lines(doc)
        if outcome.sweep:
            lines += sweep_lines(outcome.sweep)
        if outcome.scaling:
            lines += scaling_lines(outcome.scaling)
        if outcome.note:
            lines.append(f"# {outcome.note}")
        for line in lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.error:
        err_console.print(f"[bold red]error:[/] {escape(result.error)}", highlight=False, soft_wrap=True)
    if not as_json:
        console.print(f"# stored as run {result.run_id} in {result.db_path} (status {result.status})",
                      highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(result.exit_code)
