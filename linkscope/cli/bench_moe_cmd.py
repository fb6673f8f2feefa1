"""`linkscope bench moe`: MoE dispatch and combine measured beside the prediction. Parsing and printing only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from linkscope.cli.common import console, err_console, print_json, user_errors
from linkscope.cli.options import BackendOpt, LabelOpt, NprocOpt, OversubscribeOpt, RunDbOpt, TimeoutOpt

if TYPE_CHECKING:
    from linkscope.traincheck.moe import MoeOutcome

MOE_HELP = "\n\n".join((
    "Time the two all-to-alls of an expert-parallel MoE layer on every local rank (or under torchrun): each rank "
    "routes --tokens-per-rank tokens top-k over --experts experts sharded evenly over the ranks, exchanges the "
    "counts, then dispatches (one all_to_all_single with uneven splits; a token travels once to each distinct "
    "destination rank) and combines (the reverse, bf16).",
    "Prints the median over -n iterations (after -w warm-ups) of the slowest rank's time, and bandwidth in "
    "DeepEP's convention, as `predict moe` does: inside a node, bytes of token copies a rank receives over the "
    "time; across nodes, bytes counted once per destination node. Beside it, the prediction for the same routing "
    "on --system (the probed System on GPUs; on CPU ranks a profile:NAME with an all_to_all fit). --skew S makes "
    "some experts hotter (Zipf weights 1/i^S, seeded so every rank agrees).",
    "Exit codes: 0 ok; 1 a token row arrived at the wrong rank; 2 bad option; 3 a rank died, hung past --timeout, "
    "or the run was interrupted (what was measured is stored with status incomplete).",
))


@user_errors
def moe(
    tokens_per_rank: int = typer.Option(..., "--tokens-per-rank", help="Tokens each rank routes per dispatch."),
    hidden: int = typer.Option(..., "--hidden", help="Hidden size of a token."),
    topk: int = typer.Option(..., "--topk", help="Experts each token is routed to."),
    experts: int = typer.Option(..., "--experts", help="Routed experts, sharded evenly over the ranks."),
    skew: float = typer.Option(0.0, "--skew", help="Zipf exponent of the experts' popularity (0 = uniform)."),
    precision: str = typer.Option("bf16", "--precision", help="Dispatch precision: bf16, or fp8 with its 1x128 "
                                                              "scales (bytes as DeepEP sends them); combine is bf16."),
    iters: int = typer.Option(20, "-n", "--iters", help="Timed dispatches and combines."),
    warmup: int = typer.Option(5, "-w", "--warmup", help="Untimed rounds first."),
    seed: int = typer.Option(0, "--seed", help="Routing seed (the same seed routes the same tokens)."),
    system: Optional[str] = typer.Option(None, "--system", "-s", help="Predict on this System or profile:NAME "
                                                                      "(default: the probed one on GPUs)."),
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
    from linkscope.bench.moe.config import MoeConfig
    from linkscope.traincheck.moe import run_moe_check

    run = RunOptions(backend=backend, nproc=nproc, timeout_s=timeout, label=label, db_path=db,
                     quiet=quiet or as_json, oversubscribe=oversubscribe)
    cfg = MoeConfig(tokens_per_rank=tokens_per_rank, hidden=hidden, topk=topk, experts=experts, skew=skew,
                    precision=precision, iters=iters, warmup=warmup, seed=seed, run=run)
    _print(run_moe_check(cfg, system), as_json)


def _print(outcome: MoeOutcome, as_json: bool) -> None:
    from linkscope.report.bench_moe import moe_lines

    result = outcome.result
    if not result.run_id:  # a torchrun rank other than 0: rank 0 reports
        raise typer.Exit(result.exit_code)
    if as_json and outcome.document is not None:
        print_json(outcome.document)
    elif outcome.document is not None:
        for line in moe_lines(outcome.document):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.error:
        err_console.print(f"[bold red]error:[/] {escape(result.error)}", highlight=False, soft_wrap=True)
    if not as_json:
        console.print(f"# stored as run {result.run_id} in {result.db_path} (status {result.status})",
                      highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(result.exit_code)
