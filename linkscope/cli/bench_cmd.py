"""`linkscope bench` and `linkscope p2p`: measure collectives (nccl-tests semantics) and the pairwise matrix.

Parsing and printing only. torch is imported inside the commands (through linkscope.bench), so that
`linkscope --help` and the other commands never pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import typer
from typer.core import TyperCommand
from rich.markup import escape

from linkscope.cli.common import console, deprecated_spelling, err_console, user_errors
from linkscope.cli.options import BackendOpt, LabelOpt, NprocOpt, OversubscribeOpt, RunDbOpt, TimeoutOpt
from linkscope.report.runs import BI_FLAG_NOTE, matrix_table

if TYPE_CHECKING:  # annotations only: this typer vendors click as typer._click; older typers depend on click
    from typer import _click as click

    from linkscope.bench.config import RunOptions
    from linkscope.bench.recorder import RunResult

EXIT_CODES = (
    "Exit codes: 0 ok; 1 wrong results (a correctness check failed); 2 user error (bad option, or "
    "something the backend cannot do); 3 a rank died, hung past --timeout, or the run was interrupted "
    "(Ctrl-C, SIGTERM); the sizes measured so far are then stored with status incomplete."
)


def _paragraphs(*parts: str) -> str:
    # Typer reflows each paragraph itself; hard line breaks inside one would survive as ragged lines.
    return "\n\n".join(parts)


BENCH_HELP = _paragraphs(
    "Measure collectives exactly as nccl-tests does, and store the results.",
    "OPS: all_reduce (default), all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv, gather, "
    "scatter, or all. Rows are printed as each size completes, in nccl-tests' layout, and committed to the "
    "store as they come.",
    "Outside torchrun, linkscope starts --nproc local ranks itself (2 CPU ranks with gloo; one per visible GPU "
    "with nccl). Under torchrun it uses torchrun's ranks and rendezvous, multi-node included: "
    "`torchrun --nnodes 2 --nproc-per-node 8 ... -m linkscope bench all -e 8G` (see docs/multinode.md).",
    "Defaults are quick on CPU: -b 8 -e 64M -f 2 -n 20 -w 5 -c 1 -d float -o sum -a 1. On GPUs add e.g. -e 8G "
    "to reach the bandwidth plateau.",
    EXIT_CODES,
)

P2P_HELP = _paragraphs(
    "Bandwidth and latency between every pair of ranks, one pair at a time, as p2pBandwidthLatencyTest and "
    "nvbandwidth measure it.",
    "Unidirectional (row sends to column) and bidirectional (both at once, the two directions added) bandwidth "
    "in GB/s, and latency (half a round trip of a 16-byte message) in microseconds. On CPU ranks it measures "
    "the host's loopback; on GPUs, NCCL send/recv. Stored as a run of kind p2p.",
    EXIT_CODES,
)


def _run_options(backend: str, nproc: Optional[int], timeout: float, label: str, db: Optional[str],
                 json_file: Optional[str], csv_file: Optional[str], quiet: bool,
                 oversubscribe: bool = False) -> RunOptions:
    from linkscope.bench.config import RunOptions

    return RunOptions(backend=backend, nproc=nproc, timeout_s=timeout, label=label, db_path=db,
                      json_path=json_file, csv_path=csv_file, quiet=quiet, oversubscribe=oversubscribe)


def _report_end(result: RunResult) -> None:
    """Where the run went, and why it failed if it did; then exit with the run's code."""
    if not result.run_id:  # a torchrun rank other than 0: rank 0 reports
        raise typer.Exit(result.exit_code)
    if result.error:
        err_console.print(f"[bold red]error:[/] {escape(result.error)}", highlight=False, soft_wrap=True)
    console.print(f"# stored as run {result.run_id} in {result.db_path} (status {result.status})",
                  highlight=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)


@user_errors
def bench(
    ops: Optional[list[str]] = typer.Argument(None, help="Collectives to measure (default all_reduce; `all` = every "
                                                         "op)."),
    min_bytes: str = typer.Option("8", "-b", "--min-bytes", help="Smallest size (K/M/G = powers of 2)."),
    max_bytes: str = typer.Option("64M", "-e", "--max-bytes", help="Largest size."),
    step_factor: int = typer.Option(2, "-f", "--step-factor", help="Multiply the size by this each step."),
    iters: int = typer.Option(20, "-n", "--iters", help="Timed operations per size."),
    warmup: int = typer.Option(5, "-w", "--warmup", help="Untimed operations before timing each size."),
    check: int = typer.Option(1, "-c", "--check", help="Correctness-check iterations per size (0 = off)."),
    dtype: str = typer.Option("float", "-d", "--dtype", help="int8 uint8 int32 int64 half bfloat16 float double."),
    redop: str = typer.Option("sum", "-o", "--redop", help="Reduction: sum prod min max avg."),
    redop_old: Optional[str] = typer.Option(None, "--op", hidden=True, help="Deprecated spelling of --redop."),
    average: int = typer.Option(1, "-a", "--average", help="Per-rank times: 0 rank 0, 1 mean, 2 min, 3 max."),
    blocking: int = typer.Option(0, "-z", "--blocking", help="1 = wait and barrier after every operation."),
    cudagraph: int = typer.Option(0, "-G", "--cudagraph", help="Capture in a CUDA graph, replay N times (nccl)."),
    root: int = typer.Option(0, "-r", "--root", help="Root rank of broadcast, reduce, gather, scatter."),
    repeat: int = typer.Option(1, "--repeat", help="Run the whole sweep K times; rows give mean/min/max/stdev."),
    min_time: float = typer.Option(0.0, "--min-time", help="Raise iterations so each size is timed >= S seconds."),
    backend: str = BackendOpt,
    nproc: Optional[int] = NprocOpt,
    oversubscribe: bool = OversubscribeOpt,
    timeout: float = TimeoutOpt,
    label: str = LabelOpt,
    db: Optional[str] = RunDbOpt,
    json_file: Optional[str] = typer.Option(None, "-J", "--json-file",
                                            help="Also write nccl-tests' -J JSON (plus linkscope keys) to FILE."),
    json_old: Optional[str] = typer.Option(None, "--json", hidden=True, help="Deprecated spelling of --json-file."),
    csv_file: Optional[str] = typer.Option(None, "--csv", help="Also write one CSV line per size and placement."),
    quiet: bool = typer.Option(False, "--quiet", help="No table and no progress bar; only the final lines."),
) -> None:
    from linkscope.bench.config import BenchConfig
    from linkscope.bench.runner import run_bench
    from linkscope.bench.sizes import parse_size

    redop = deprecated_spelling(redop_old, "--op", "-o/--redop", redop)
    json_file = deprecated_spelling(json_old, "--json FILE", "-J/--json-file FILE", json_file)
    cfg = BenchConfig(
        ops=tuple(ops or ("all_reduce",)), min_bytes=parse_size(min_bytes, "-b/--min-bytes"),
        max_bytes=parse_size(max_bytes, "-e/--max-bytes"), step_factor=step_factor, iters=iters, warmup=warmup,
        check=check, dtype=dtype, redop=redop, average=average, blocking=blocking, cudagraph=cudagraph, root=root,
        repeat=repeat, min_time_s=min_time,
        run=_run_options(backend, nproc, timeout, label, db, json_file, csv_file, quiet, oversubscribe),
    )
    _report_end(run_bench(cfg))


def _print_matrices(result: RunResult) -> None:
    from linkscope.bench.p2p import matrix
    from linkscope.results.records import bi_below_one_way

    world = result.info.world_size if result.info else 0
    size = result.pair_rows[0].size_bytes if result.pair_rows else 0
    flagged = bi_below_one_way(result.pair_rows)
    for title, field, digits in (
        (f"Unidirectional bandwidth (GB/s), {size} B messages, row sends to column", "uni_gb_per_s", 2),
        ("Bidirectional bandwidth (GB/s), both directions at once, added", "bi_gb_per_s", 2),
        ("Latency (us), half a round trip", "latency_us", 1),
    ):
        console.print(f"\n{title}", highlight=False, soft_wrap=True)
        marks = flagged if field == "bi_gb_per_s" else None
        console.print(matrix_table(matrix(result.pair_rows, world, field), digits, marks))
        if marks:
            console.print(BI_FLAG_NOTE, highlight=False, soft_wrap=True, markup=False)


@user_errors
def p2p(
    size: str = typer.Option("32M", "--size", help="Message size for bandwidth (K/M/G = powers of 2)."),
    iters: int = typer.Option(20, "-n", "--iters", help="Messages per bandwidth measurement."),
    warmup: int = typer.Option(5, "-w", "--warmup", help="Untimed messages first."),
    latency_iters: int = typer.Option(100, "--latency-iters", help="Round trips for latency."),
    backend: str = BackendOpt,
    nproc: Optional[int] = NprocOpt,
    oversubscribe: bool = OversubscribeOpt,
    timeout: float = TimeoutOpt,
    label: str = LabelOpt,
    db: Optional[str] = RunDbOpt,
    json_file: Optional[str] = typer.Option(None, "-J", "--json-file", help="Also write the run as JSON to FILE."),
    json_old: Optional[str] = typer.Option(None, "--json", hidden=True, help="Deprecated spelling of --json-file."),
    quiet: bool = typer.Option(False, "--quiet", help="No matrices and no progress bar; only the final lines."),
) -> None:
    from linkscope.bench.config import P2PConfig
    from linkscope.bench.runner import run_p2p
    from linkscope.bench.sizes import parse_size

    json_file = deprecated_spelling(json_old, "--json FILE", "-J/--json-file FILE", json_file)
    cfg = P2PConfig(size_bytes=parse_size(size, "--size"), iters=iters, warmup=warmup, latency_iters=latency_iters,
                    run=_run_options(backend, nproc, timeout, label, db, json_file, None, quiet, oversubscribe))
    result = run_p2p(cfg)
    if result.run_id and result.pair_rows and not quiet:
        _print_matrices(result)
    _report_end(result)


SUB_ARGS = "linkscope.bench.sub_args"
SUBCOMMANDS = ("train", "moe", "kv")
"""Words that are never ops: `bench train ...`, `bench moe ...` and `bench kv ...` hand the rest of the line to their
command."""


def _subcommand(name: str) -> tuple[str, Any]:
    if name == "train":
        from linkscope.cli.train_cmd import TRAIN_HELP, train

        return TRAIN_HELP, train
    if name == "kv":
        from linkscope.cli.bench_kv_cmd import KV_HELP, kv

        return KV_HELP, kv
    from linkscope.cli.bench_moe_cmd import MOE_HELP, moe

    return MOE_HELP, moe


class _BenchCommand(TyperCommand):
    """`bench OPS...` measures collectives; `bench train ...` and `bench moe ...` hand the rest of the line to their
    own command (words that are never ops, so every existing `bench` command line keeps its meaning)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in SUBCOMMANDS:
            ctx.meta[SUB_ARGS] = (args[0], args[1:])
            return []
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        sub = ctx.meta.pop(SUB_ARGS, None)
        if sub is None:
            return super().invoke(ctx)
        name, rest = sub
        help_text, function = _subcommand(name)
        sub_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        sub_app.command(name, help=help_text)(function)
        command = typer.main.get_command(sub_app)
        # Its own root, so that help and errors read `linkscope bench train`, not the ops argument of `bench`.
        with command.make_context(f"{ctx.command_path} {name}", rest) as sub_ctx:
            return command.invoke(sub_ctx)


def register(app: typer.Typer) -> None:
    """Add `bench` (with `bench train` and `bench moe`) and `p2p` to the command line."""
    app.command("bench", cls=_BenchCommand, help=BENCH_HELP + "\n\n`linkscope bench train --help`: measure a real "
                "training loop beside its prediction. `linkscope bench moe --help`: time MoE dispatch and combine. "
                "`linkscope bench kv --help`: move KV-cache pages between ranks.",
                short_help="Measure collectives with nccl-tests' semantics; store them.")(bench)
    app.command("p2p", help=P2P_HELP, short_help="Bandwidth and latency matrices between every pair of ranks.")(p2p)
