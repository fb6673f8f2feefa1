"""`linkscope topo` (this machine as a System) and `linkscope nccl-log FILE` (transports and fallbacks of a run)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.loader import load_db
from linkscope.hardware.resolve import resolve_system
from linkscope.report.catalog import system_detail
from linkscope.report.probe import (fabric_table, findings_table, gpu_table, host_table, log_summary, matrix_table,
                                    nic_table, pair_table, tuning_table)

if TYPE_CHECKING:  # the probe package is imported by the commands that use it, not at start-up
    from linkscope.probe.nccl_log import NcclLogReport
    from linkscope.probe.to_system import ProbedSystem

# ---- topo ---------------------------------------------------------------------------------------------------------


@user_errors
def topo(as_json: bool = typer.Option(False, "--json", help="JSON instead of tables.")) -> None:
    """This machine as a System: GPUs, NVLink, the topo -m matrix, PCIe, NICs, NUMA, host."""
    from linkscope.probe.machine import probe_machine
    from linkscope.probe.to_system import to_system

    probe = probe_machine()
    result = to_system(probe, load_db())
    if as_json:
        print_json({"probe": probe.to_dict(), **result.to_dict()})
        return
    console.print(host_table(probe))
    console.print(gpu_table(probe))
    if probe.topo is not None and probe.topo.columns:
        console.print(matrix_table(probe))
    fabric = fabric_table(probe)
    if fabric is not None:
        console.print(fabric)
    console.print(nic_table(probe))
    _print_system(result)
    for line in [*probe.notes, *(str(p) for p in probe.problems)]:
        console.print(f"[dim]{line}[/]", highlight=False)


def _print_system(result: ProbedSystem) -> None:
    if result.system is None:
        console.print(f"[yellow]No System:[/] {result.reason}", highlight=False)
        return
    console.print(system_detail(result.system))
    for note in result.notes:
        console.print(f"  - {note}", highlight=False)


# ---- nccl-log -----------------------------------------------------------------------------------------------------


@user_errors
def nccl_log(
    file: Path = typer.Argument(..., help="Output of a run with NCCL_DEBUG=INFO."),
    as_json: bool = typer.Option(False, "--json", help="JSON instead of tables."),
    system: Optional[str] = typer.Option(None, "--system", help="Take the expectations from this System "
                                         "(preset, offering id or YAML file)."),
    expect_nvlink: Optional[bool] = typer.Option(None, "--expect-nvlink/--no-expect-nvlink",
                                                 help="GPUs of a node are joined by NVLink."),
    expect_ib: Optional[bool] = typer.Option(None, "--expect-ib/--no-expect-ib",
                                             help="Nodes are joined by RDMA (InfiniBand, RoCE or EFA)."),
    expect_nvls: Optional[bool] = typer.Option(None, "--expect-nvls/--no-expect-nvls",
                                               help="NVSwitch with NVLS (H100/H200/B200 and newer)."),
    expect_mnnvl: Optional[bool] = typer.Option(None, "--expect-mnnvl/--no-expect-mnnvl",
                                                help="An NVLink domain spans the hosts (GB200/GB300 NVL72 trays), so "
                                                     "traffic between them should stay on NVLink."),
    fail_on_fallback: bool = typer.Option(False, "--fail-on-fallback", help="Exit 1 when a fallback or an error "
                                                                            "(a failed network completion) is found."),
) -> None:
    """Which transport each pair of ranks used (P2P, SHM, NET/IB, sockets, NVLS...) and the fallbacks."""
    from linkscope.probe.nccl_findings import Expectations
    from linkscope.probe.nccl_log import read_nccl_log

    base = Expectations.from_system(resolve_system(system, load_db())) if system else Expectations()
    expect = Expectations(nvlink=base.nvlink if expect_nvlink is None else expect_nvlink,
                          ib=base.ib if expect_ib is None else expect_ib,
                          nvls=base.nvls if expect_nvls is None else expect_nvls, gdr=base.gdr,
                          mnnvl=base.mnnvl if expect_mnnvl is None else expect_mnnvl)
    report = read_nccl_log(file, expect)
    if as_json:
        print_json(report.to_dict())
    else:
        _print_log_report(report)
    if fail_on_fallback and (report.fallbacks or report.errors):
        raise typer.Exit(1)


def _print_log_report(report: NcclLogReport) -> None:
    console.print(log_summary(report), highlight=False)
    if report.pairs:
        console.print(pair_table(report))
    console.print(findings_table(report))
    tuning = tuning_table(report)
    if tuning is not None:
        console.print(tuning)
    for problem in report.log.problems[:20]:
        console.print(f"[dim]{problem}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `topo` and `nccl-log` to the command line."""
    app.command("topo")(topo)
    app.command("nccl-log")(nccl_log)
