"""Terminal views of `topo` (the probed machine) and `nccl-log` (transports and fallbacks of a run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from linkscope.report.columns import Column

if TYPE_CHECKING:  # annotations only: the probe package loads when a command probes, not at start-up
    from linkscope.probe.machine import MachineProbe
    from linkscope.probe.nccl_log import NcclLogReport

MAX_PAIR_ROWS = 64
_SEVERITY_STYLE = {"ok": "green", "warning": "yellow", "fallback": "bold red", "error": "bold red"}


def host_table(probe: MachineProbe) -> Table:
    """Host facts: CPU, sockets, NUMA nodes, memory, kernel, GPU driver."""
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


def gpu_table(probe: MachineProbe) -> Table:
    """One row per GPU: memory, PCIe generation and width (current/max), NVLinks, NUMA node."""
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


def fabric_table(probe: MachineProbe) -> Table | None:
    """The NVLink fabric each GPU joined and the IMEX domain (GB200/GB300 NVL72 trays); None where no GPU reports
    a fabric."""
    fabric, imex = probe.fabric, probe.imex
    if fabric is None or not fabric.reported:
        return None
    caption = "IMEX: not found"
    if imex is not None and imex.source != "none":
        state = imex.domain_state or ("files only" if imex.source == "files" else "?")
        caption = (f"IMEX ({imex.source}): domain {state}, {_opt(imex.node_count)} nodes, "
                   f"channels {', '.join(imex.channels) or 'none'}")
    table = Table(title="NVLink fabric", caption=caption)
    for column in ("GPU", "state", "status", "clique", "cluster", "health"):
        table.add_column(column)
    for i, g in enumerate(fabric.gpus):
        table.add_row(g.gpu or str(i), _opt(g.state), _opt(g.status), _opt(g.clique_id), _opt(g.cluster_uuid),
                      _opt(g.health))
    return table


def _opt(value: object) -> str:
    return "?" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def matrix_table(probe: MachineProbe) -> Table:
    """`nvidia-smi topo -m` as read: how each pair of devices is connected."""
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


def nic_table(probe: MachineProbe) -> Table:
    """RDMA ports and plain Ethernet interfaces."""
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


def log_summary(report: NcclLogReport) -> str:
    """One line: NCCL version, ranks, nodes, networks and how many lines were NCCL's."""
    log = report.log
    hosts = report.hosts
    networks = {n for _, n in log.networks} | {f"OFI/{p}" for _, p in log.ofi_providers}
    named = f"{len(hosts)} host{'s' if len(hosts) != 1 else ''} named" if hosts else "no host named"
    facts = [f"{log.library} {log.version or '?'}", f"{report.nranks or '?'} ranks", f"{report.nnodes or '?'} nodes",
             named,
             f"network {', '.join(sorted(networks)) or '?'}",
             f"{log.nccl_lines} NCCL lines of {log.lines_total}"]
    text = f"[bold]{report.source}[/]: " + ", ".join(facts)
    m = report.mnnvl()
    if m.enabled is None and not report.expectations.mnnvl and not report.log.mnnvl_fabric:
        return text
    state = {True: "on", False: "off", None: "not stated"}[m.enabled]
    domain = [f"NVLink across hosts (MNNVL): {state}", *([f"clique of {m.clique_size} ranks"] if m.clique_size else []),
              f"{m.pairs_over_nvlink} host pairs over P2P/MNNVL", f"{len(m.pairs_over_net)} over the network",
              f"NVLS across hosts: {'yes' if m.nvls_across_hosts else 'no'}"]
    return text + "\n" + ", ".join(domain)


def pair_table(report: NcclLogReport) -> Table:
    """Transports per pair of ranks with their channel counts (the first MAX_PAIR_ROWS)."""
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


def findings_table(report: NcclLogReport) -> Table:
    """Each finding with its severity and the log lines behind it."""
    table = Table(title="Findings")
    for column in ("severity", "finding", "lines"):
        table.add_column(column)
    for finding in report.findings:
        style = _SEVERITY_STYLE[finding.severity]
        table.add_row(f"[{style}]{finding.severity}[/]", finding.message, ", ".join(map(str, finding.lines)))
    return table


def tuning_table(report: NcclLogReport) -> Table | None:
    """NCCL's algorithm, protocol and channels per op and size (TUNING lines); None when the log has none."""
    sizes = report.tuning()
    if not sizes:
        return None
    table = Table(title="what NCCL chose (NCCL_DEBUG_SUBSYS=TUNING)", show_edge=False)
    columns: tuple[Column, ...] = (("op", "left"), ("bytes", "right"), ("algorithm", "left"), ("protocol", "left"),
                                   ("channels", "right"), ("calls", "right"), ("line", "right"))
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for c in sizes:
        calls = f"{c.calls}" + (f" ({c.other_calls} chose otherwise)" if c.other_calls else "")
        table.add_row(c.op or "?", str(c.nccl_bytes), c.algo, c.proto, "-" if c.channels is None else str(c.channels),
                      calls, str(c.first_line))
    return table
