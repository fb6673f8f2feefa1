"""`linkscope bench kv`: KV-cache pages moved between ranks beside the model. Parsing and printing only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from linkscope.cli.common import console, err_console, print_json, user_errors
from linkscope.cli.options import BackendOpt, LabelOpt, NprocOpt, OversubscribeOpt, RunDbOpt, TimeoutOpt
from linkscope.hardware.errors import UserError

if TYPE_CHECKING:
    from linkscope.traincheck.kv import KvOutcome

KV_HELP = "\n\n".join((
    "Move KV-cache-shaped pages between ranks the way disaggregated serving engines do: the first half of the ranks "
    "(prefill) sends each request's pages to the second half (decode), one message per page, every page of the "
    "requests in flight posted at once (gloo on CPU, NCCL send/recv on GPU). A page is --block-tokens tokens x "
    "layers x KV heads x head dim (x K and V) of --model's cache (one layer's block with --kv-granularity layer).",
    "Prints the median over -n transfers (after -w warm-ups) of the slowest rank's time, GB/s per pair, and beside "
    "it the model's figure on --system (the probed System on GPUs; on CPU ranks a profile:NAME with a KV fit from "
    "`calibrate` of a bench kv run).",
    "Exit codes: 0 ok; 1 a page arrived wrong; 2 bad option; 3 a rank died, hung past --timeout, or the run was "
    "interrupted (the points measured are stored with status incomplete).",
))


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UserError(f"{flag}: expected comma-separated whole numbers, got '{text[:40]}'") from None
    if not values:
        raise UserError(f"{flag}: give at least one value")
    return values


@user_errors
def kv(
    model: Optional[str] = typer.Option("llama3-8b", "--model", "-m", help="Model preset whose KV cache is paged "
                                                                         "(its layers, KV heads, head dim)."),
    layers: Optional[int] = typer.Option(None, "--layers", help="Layers (default: the model's)."),
    kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="KV heads each rank holds (default: the "
                                                                   "model's over --tp)."),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="Head dim (default: the model's)."),
    tp: int = typer.Option(1, "--tp", help="Tensor parallelism of the pools: each rank holds its share of heads."),
    tokens: int = typer.Option(512, "--tokens", help="Prompt tokens per request."),
    block_tokens: str = typer.Option("16,32,64,128", "--block-tokens", help="Tokens per page, comma-separated."),
    in_flight: str = typer.Option("1,4", "--in-flight", help="Requests whose pages move together, comma-separated."),
    granularity: str = typer.Option("request", "--kv-granularity", help="request (a page holds a block of every "
                                                                        "layer) or layer."),
    kv_precision: str = typer.Option("bf16", "--kv-precision", help="bf16, fp16 or fp8."),
    iters: int = typer.Option(10, "-n", "--iters", help="Timed transfers per point."),
    warmup: int = typer.Option(2, "-w", "--warmup", help="Untimed transfers first."),
    system: Optional[str] = typer.Option(None, "--system", "-s", help="Set the model's figure for this System or "
                                                                      "profile:NAME beside the measurement."),
    backend: str = BackendOpt,
    nproc: Optional[int] = NprocOpt,
    oversubscribe: bool = OversubscribeOpt,
    timeout: float = TimeoutOpt,
    label: str = LabelOpt,
    db: Optional[str] = RunDbOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of the text."),
    quiet: bool = typer.Option(False, "--quiet", help="No device lines."),
) -> None:
    from linkscope.bench.config import RunOptions
    from linkscope.bench.kv.config import KvConfig
    from linkscope.hardware.limits import MAX_GPUS, check_number
    from linkscope.model.step.transformer import load_model
    from linkscope.traincheck.kv import run_kv_check

    check_number(tp, "--tp", 1, MAX_GPUS)
    spec = load_model(model) if model else None
    if spec is None and (layers is None or kv_heads is None or head_dim is None):
        raise UserError("give --model, or --layers, --kv-heads and --head-dim")
    heads = kv_heads if kv_heads is not None else max(1, spec.kv_heads // min(tp, spec.kv_heads)) if spec else 1
    dim = head_dim if head_dim is not None else (spec.kv_dim // spec.kv_heads if spec else 1)
    run = RunOptions(backend=backend, nproc=nproc, timeout_s=timeout, label=label, db_path=db,
                     quiet=quiet or as_json, oversubscribe=oversubscribe)
    cfg = KvConfig(layers=layers if layers is not None else spec.layers if spec else 1, kv_heads=heads,
                   head_dim=dim, tokens=tokens, block_tokens=_ints(block_tokens, "--block-tokens"),
                   in_flight=_ints(in_flight, "--in-flight"), granularity=granularity, kv_precision=kv_precision,
                   iters=iters, warmup=warmup, model=spec.id if spec else "", run=run)
    _print(run_kv_check(cfg, system), as_json)


def _print(outcome: KvOutcome, as_json: bool) -> None:
    from linkscope.report.bench_kv import kv_lines

    result = outcome.result
    if not result.run_id:  # a torchrun rank other than 0: rank 0 reports
        raise typer.Exit(result.exit_code)
    if as_json and outcome.document is not None:
        print_json(outcome.document)
    elif outcome.document is not None:
        for line in kv_lines(outcome.document):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.error:
        err_console.print(f"[bold red]error:[/] {escape(result.error)}", highlight=False, soft_wrap=True)
    if not as_json:
        console.print(f"# stored as run {result.run_id} in {result.db_path} (status {result.status})",
                      highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(result.exit_code)
