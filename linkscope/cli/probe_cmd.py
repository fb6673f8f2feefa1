"""`linkscope topo` (this machine as a System) and `linkscope nccl-log FILE` (transports and fallbacks of a run)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.table import Table

from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.loader import load_db
from linkscope.hardware.resolve import resolve_system
from linkscope.report.catalog import system_detail

if TYPE_CHECKING:  # the probe package is imported by the commands that use it, not at start-up
    from linkscope.probe.machine import MachineProbe
    from linkscope.probe.nccl_log import NcclLogReport
    from linkscope.probe.to_system import ProbedSystem

MAX_PAIR_ROWS = 64
_SEVERITY_STYLE = {"ok": "green", "warning": "yellow", "fallback": "bold red"}


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
    console.print(_host_table(probe))
    console.print(_gpu_table(probe))
    if probe.topo is not None and probe.topo.columns:
        console.print(_matrix_table(probe))
    console.print(_nic_table(probe))
    _print_system(result)
    for line in [*probe.notes, *(str(p) for p in probe.problems)]:
        console.print(f"[dim]{line}[/]", highlight=False)


def _host_table(probe: MachineProbe) -> Table:
    host = probe.host
    table = Table(title=f"Host {host.hostname}", show_header=False)
    numa = ", ".join(f"{n.id}: CPUs {n.cpulist}" for n in host.numa_nodes) or "not reported"
    rows = [("CPU", f"{host.cpu_model or '?'} ({host.cpu_vendor or 'vendor unknown'})"),
            ("sockets", str(host.cpu_sockets or "?")), ("logical CPUs", str(host.logical_cpus or "?")),
            ("NUMA nodes", numa), ("memory", f"{host.memory_gib:g} GiB" if host.memory_gib else "?"),
            ("kernel", host.kernel or "?"), ("GPU driver", probe.driver_version or "none"),
            ("GPU source", probe.gpu_source)]
    for key, value in rows:
        table.add_row(key, value)
    return table


def _gpu_table(probe: MachineProbe) -> Table:
    table = Table(title=f"GPUs ({len(probe.gpus)})")
    for column in ("#", "name", "memory GiB", "PCIe gen (cur/max)", "width (cur/max)", "NVLinks", "NUMA"):
        table.add_column(column)
    for gpu in probe.gpus:
        rates = sorted({f"{link.gb_per_s:g}" for link in gpu.nvlinks if link.active and link.gb_per_s})
        links = f"{gpu.active_nvlinks}/{len(gpu.nvlinks)} x {'/'.join(rates)} GB/s" if gpu.nvlinks else "-"
        table.add_row(str(gpu.index), gpu.name, _opt(gpu.memory_gib), f"{_opt(gpu.pcie_gen_current)}/"
                      f"{_opt(gpu.pcie_gen_max)}", f"x{_opt(gpu.pcie_width_current)}/x{_opt(gpu.pcie_width_max)}",
                      links, _opt(gpu.numa_node))
    if not probe.gpus:
        table.add_row("-", "no GPU found", "", "", "", "", "")
    return table


def _opt(value: object) -> str:
    return "?" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _matrix_table(probe: MachineProbe) -> Table:
    topo = probe.topo
    assert topo is not None  # checked by the caller
    table = Table(title=f"Connections ({topo.source})")
    table.add_column("")
    for column in topo.columns:
        table.add_column(column, justify="center")
    for row in topo.columns:
        if row in topo.cells:
            table.add_row(row, *(topo.cells[row].get(column, "") for column in topo.columns))
    if topo.nic_names:
        table.caption = ", ".join(f"{nic}={name}" for nic, name in topo.nic_names.items())
    return table


def _nic_table(probe: MachineProbe) -> Table:
    table = Table(title="NICs")
    for column in ("device", "port", "link layer", "state", "rate Gbit/s", "netdev", "NUMA"):
        table.add_column(column)
    for port in probe.rdma_ports:
        table.add_row(port.device, str(port.port), port.link_layer or "?", port.state or "?",
                      port.rate_text or _opt(port.rate_gbit_per_s), ",".join(port.netdevs), _opt(port.numa_node))
    for nic in probe.ethernet:
        table.add_row(nic.name, "-", "Ethernet (no RDMA)", nic.operstate or "?", _opt(nic.speed_gbit_per_s), "", "")
    if not probe.rdma_ports and not probe.ethernet:
        table.add_row("none", "", "", "", "", "", "")
    return table


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
    fail_on_fallback: bool = typer.Option(False, "--fail-on-fallback", help="Exit 1 when a fallback is found."),
) -> None:
    """Which transport each pair of ranks used (P2P, SHM, NET/IB, sockets, NVLS...) and the fallbacks."""
    from linkscope.probe.nccl_findings import Expectations
    from linkscope.probe.nccl_log import read_nccl_log

    base = Expectations.from_system(resolve_system(system, load_db())) if system else Expectations()
    expect = Expectations(nvlink=base.nvlink if expect_nvlink is None else expect_nvlink,
                          ib=base.ib if expect_ib is None else expect_ib,
                          nvls=base.nvls if expect_nvls is None else expect_nvls)
    report = read_nccl_log(file, expect)
    if as_json:
        print_json(report.to_dict())
    else:
        _print_log_report(report)
    if fail_on_fallback and report.fallbacks:
        raise typer.Exit(1)


def _print_log_report(report: NcclLogReport) -> None:
    log = report.log
    facts = [f"NCCL {log.version or '?'}", f"{report.nranks or '?'} ranks", f"{report.nnodes or '?'} nodes",
             f"network {', '.join(sorted({n for _, n in log.networks})) or '?'}",
             f"{log.nccl_lines} NCCL lines of {log.lines_total}"]
    console.print(f"[bold]{report.source}[/]: " + ", ".join(facts), highlight=False)
    if report.pairs:
        console.print(_pair_table(report))
    console.print(_findings_table(report))
    for problem in log.problems[:20]:
        console.print(f"[dim]{problem}[/]", highlight=False)


def _pair_table(report: NcclLogReport) -> Table:
    table = Table(title="Transport per pair of ranks (channels)")
    for column in ("pair", "transports", "same host", "GPUDirect RDMA"):
        table.add_column(column)
    for pair in report.pairs[:MAX_PAIR_ROWS]:
        paths = ", ".join(f"{path} x{pair.channels_by_path[path]}" for path in pair.paths)
        same = {True: "yes", False: "no", None: "?"}[pair.same_host]
        gdr = f"{pair.gdrdma_channels}/{pair.net_channels}" if pair.net_channels else "-"
        table.add_row(f"{pair.src_rank} -> {pair.dst_rank}", paths, same, gdr)
    hidden = len(report.pairs) - MAX_PAIR_ROWS
    if hidden > 0:
        table.caption = f"{hidden} more pairs; --json lists them all"
    return table


def _findings_table(report: NcclLogReport) -> Table:
    table = Table(title="Findings")
    for column in ("severity", "finding", "lines"):
        table.add_column(column)
    for finding in report.findings:
        style = _SEVERITY_STYLE[finding.severity]
        table.add_row(f"[{style}]{finding.severity}[/]", finding.message, ", ".join(map(str, finding.lines)))
    return table


def register(app: typer.Typer) -> None:
    """Add `topo` and `nccl-log` to the command line."""
    app.command("topo")(topo)
    app.command("nccl-log")(nccl_log)
