"""The nccl-tests text around the data rows: run header, device lines, per-op markers and footers.

Rows, column headings and footers come from `linkscope.results.nccltests.table`, the same code that reads
and re-prints imported nccl-tests output, so a linkscope table diffs cleanly against an nccl-tests one.
"""

from __future__ import annotations

from linkscope import __version__
from linkscope.bench.config import BenchConfig
from linkscope.bench.layout import RankInfo
from linkscope.bench.ops import OPS
from linkscope.results.records import CollectiveRow
from linkscope.results.nccltests.table import format_nccl_tests_table, format_table_footer, format_table_header


def run_header(cfg: BenchConfig, versions: dict[str, str], backend: str) -> list[str]:
    """The first lines: what produced the output, and nccl-tests' parameter line."""
    nccl = versions.get("nccl", "none")
    return [
        f"# nccl-tests-compatible output from linkscope version {__version__} "
        f"(torch {versions.get('torch', '?')}, backend {backend}, nccl-library {nccl})",
        f"# nThread 1 nGpus 1 minBytes {cfg.min_bytes} maxBytes {cfg.max_bytes} "
        f"step: {cfg.step_factor}(factor) warmup iters: {cfg.warmup} iters: {cfg.iters} "
        f"agg iters: 1 validation: {cfg.check} graph: {cfg.cudagraph}",
        "#",
    ]


def device_lines(infos: list[RankInfo]) -> list[str]:
    """`# Using devices` and one line per rank, in nccl-tests' layout."""
    lines = ["# Using devices"]
    for info in sorted(infos, key=lambda i: i.rank):
        lines.append(
            f"#  Rank {info.rank:2d} Group {0:2d} Pid {info.pid:6d} on {info.host:>10s} "
            f"device {info.device_index:2d} [{info.device_bus}] {info.device_name}"
        )
    lines.append("#")
    return lines


def header_lines() -> list[str]:
    """The column headings (nccl-tests' four lines, starting with a bare `#`)."""
    return format_table_header().rstrip("\n").split("\n")


def op_start_lines(op: str, repeat: int, repeats: int) -> list[str]:
    """The marker before an op's table, and the column headings."""
    marker = f"# Collective test starting: {OPS[op].perf_name}"
    if repeats > 1:
        marker += f" (repeat {repeat + 1} of {repeats})"
    return [marker, *header_lines()]


def op_end_lines(op: str, rows: list[CollectiveRow]) -> list[str]:
    """The footer after an op's table."""
    return [*format_table_footer(rows, program_name=OPS[op].perf_name).rstrip("\n").split("\n"), "#"]


def wrong_lines(op: str, size_bytes: int, placement: str, by_rank: dict[int, int]) -> list[str]:
    """nccl-tests' per-rank error lines, with the op, size and placement spelt out."""
    where = f"{op} {size_bytes} B {placement.replace('_', '-')}"
    return [f"#  rank={rank} #wrong={n} ({where})" for rank, n in sorted(by_rank.items())]


def summary_lines(op: str, rows: list[CollectiveRow], repeats: int) -> list[str]:
    """After `--repeat K`: the table of mean times over the repeats."""
    title = f"# {OPS[op].perf_name}: mean over {repeats} repeats (min, max and stdev are in the store and --json)"
    return [title, format_nccl_tests_table(rows).rstrip("\n"), "#"]
