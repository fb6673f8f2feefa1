"""A probed machine as a linkscope System (origin `probe`), with every assumption written into its notes.

Rules:
- Scale-up from the GPU pairs of `nvidia-smi topo -m` (or NVML's equivalent): `NV#` between every pair with each
  GPU's full link count is NVSwitch (only a switch gives every pair all links, e.g. NV18 on H100, NV12 on A100);
  `NV#` on some pairs only, or fewer links per pair, is an NVLink mesh, or a bridge when the GPUs are PCIe
  cards; no `NV#` is PCIe at the generation and width the GPUs negotiated.
- NVLink bandwidth is the datasheet's per-link rate times the links in use. The rates the driver displays
  (25 GB/s x 12 on A100, 26.5625 x 18 on H100) sum above the per-direction datasheet figure, so they are kept in the
  notes for comparison only.
- Scale-out from the active RDMA ports: link layer InfiniBand -> infiniband, Ethernet -> roce, the efa driver ->
  efa; where the matrix shows NICs next to GPUs (PIX/PXB) only those count. No RDMA: TCP over the fastest Ethernet
  NIC, else none.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date
from itertools import combinations
from typing import Any

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.hardware.serialize import system_dict
from linkscope.hardware.specs import GpuSpec, host_cpu_spec
from linkscope.hardware.system import (
    NO_SCALE_OUT,
    Fabric,
    InNetworkReduction,
    NodeSpec,
    ScaleOut,
    ScaleUp,
    ScaleUpKind,
    System,
)
from linkscope.probe.ethernet import fastest_nic
from linkscope.probe.machine import MachineProbe
from linkscope.probe.nvml import nvlinks_between
from linkscope.probe.records import RdmaPort
from linkscope.probe.topo_matrix import TopoMatrix, pcie_level

NVLS_ARCHS = ("hopper", "blackwell")
"""Architectures whose NVSwitch systems offer NVLink SHARP (NVLS) reductions."""
_IB_GEN_BY_4X_RATE = {100.0: "EDR", 200.0: "HDR", 400.0: "NDR", 800.0: "XDR"}
_GPU_LOCAL_LEVELS = ("PIX", "PXB")
_BRIDGE_FORM_FACTORS = ("PCIe", "NVL")


@dataclass
class ProbedSystem:
    """The System built from a probe, or None with the reason; `notes` lists what was assumed."""

    system: System | None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the System as `system_dict` writes it, or null with the reason."""
        return {"system": None if self.system is None else system_dict(self.system), "reason": self.reason,
                "notes": list(self.notes)}


def to_system(probe: MachineProbe, db: HardwareDB | None = None) -> ProbedSystem:
    """Build the System of a probed machine (a CPU-only host included); None, with the reason, for mixed or
    unknown GPU models."""
    if not probe.gpus:
        why = "; ".join(probe.notes) or "no GPU reported"
        return _cpu_host(probe, f"no NVIDIA GPU found ({why}): the System is this host's CPU ranks")
    names = sorted({gpu.name for gpu in probe.gpus})
    if len(names) > 1:
        return ProbedSystem(None, f"mixed GPU models ({', '.join(names)}); a System has one GPU model per node")
    db = db if db is not None else load_db()
    spec = db.gpu(names[0])
    if spec is None:
        return ProbedSystem(None, f"GPU '{names[0]}' is not in the hardware database; add it to a data file "
                                  f"(known: {', '.join(db.gpu_names())})")
    notes: list[str] = []
    scale_up = _scale_up(probe, spec, db, notes)
    scale_up = replace(scale_up, domain_size=_nvlink_domain(probe, scale_up, spec, db, notes))
    node = NodeSpec(gpu=spec, gpus=len(probe.gpus), scale_up=scale_up,
                    scale_out=_scale_out(probe, db, notes), host_pcie=_pcie_generation(probe, spec, db),
                    cpu_vendor=probe.host.cpu_vendor, cpu_sockets=probe.host.cpu_sockets or 1)
    host = probe.host.hostname
    system = System(id=f"probe/{host}", node=node, name=f"{host}: {node.gpus}x {spec.id}",
                    description=_describe(node), origin="probe",
                    source=f"probe of {host} ({probe.gpu_source}, sysfs)", as_of=date.today(), notes=tuple(notes))
    return ProbedSystem(system, notes=notes)


def _cpu_host(probe: MachineProbe, note: str) -> ProbedSystem:
    """A machine without GPUs as a System: its CPU, one slot per logical CPU, host memory between ranks."""
    host = probe.host
    slots = host.logical_cpus or 1
    notes = [note]
    node = NodeSpec(gpu=host_cpu_spec(host.cpu_model, host.memory_gib), gpus=slots,
                    scale_up=ScaleUp(kind="host", generation="host-memory", bw_gb_per_s=0.0, domain_size=slots),
                    scale_out=_tcp_scale_out(probe, notes), cpu_vendor=host.cpu_vendor,
                    cpu_sockets=host.cpu_sockets or 1)
    system = System(id=f"probe/{host.hostname}", node=node, name=f"{host.hostname}: CPU only",
                    description=f"{host.cpu_model or 'CPU'}, {slots} logical CPUs, no GPU", origin="probe",
                    source=f"probe of {host.hostname} (no GPU; /proc, sysfs)", as_of=date.today(),
                    notes=tuple(notes))
    return ProbedSystem(system, notes=notes)


def _describe(node: NodeSpec) -> str:
    su, so = node.scale_up, node.scale_out
    rate = "?" if so.nic_gbit_per_s is None else f"{so.nic_gbit_per_s:g}"
    out = "no scale-out NIC" if so.fabric == "none" else f"{so.nics}x {rate} Gbit/s {so.fabric}"
    return f"{node.gpus}x {node.gpu.id}, {su.kind} ({su.generation}, {su.bw_gb_per_s:g} GB/s per GPU), {out}"


# ---- scale-up ---------------------------------------------------------------------------------------------------


def _nvlink_domain(probe: MachineProbe, scale_up: ScaleUp, spec: GpuSpec, db: HardwareDB, notes: list[str]) -> int:
    """GPUs of the NVLink domain: the node's, or, where every GPU joined one clique of a fabric (a GB200/GB300 NVL72
    tray), the IMEX domain's nodes times this node's GPUs (the rack's size where IMEX does not say)."""
    n = len(probe.gpus)
    fabric, imex = probe.fabric, probe.imex
    if fabric is None or not fabric.reported or scale_up.kind != "nvswitch":
        return scale_up.domain_size
    if not fabric.in_one_domain:
        off = [f"GPU {g.gpu or i}: {g.state or 'no state'}/{g.status or 'no status'}, clique {g.clique_id}"
               for i, g in enumerate(fabric.gpus) if not g.in_domain]
        if off and any(g.clique_id for g in fabric.gpus):
            notes.append("the NVLink fabric has not joined every GPU into one clique (" + "; ".join(off[:4]) +
                         "): no NVLink domain beyond this node (`linkscope check` names the fix)")
        return scale_up.domain_size
    cluster, clique = next(iter(fabric.cliques))
    nodes = imex.node_count if imex is not None else None
    if nodes:
        notes.append(f"NVLink domain across nodes: clique {clique} of cluster {cluster}, {nodes} nodes in the IMEX "
                     f"domain ({imex.source if imex else ''}) x {n} GPUs")
        return nodes * n
    racks = [s.node.scale_up.domain_size for s in db.systems.values()
             if s.node.gpu.family_name == spec.family_name and s.domain_spans_nodes]
    if not racks:
        notes.append(f"the GPUs joined clique {clique} of cluster {cluster}, but neither IMEX nor a preset gives the "
                     f"domain's size: taken as this node")
        return scale_up.domain_size
    notes.append(f"NVLink domain across nodes: clique {clique} of cluster {cluster}; IMEX does not say how many "
                 f"nodes it joins, so the {max(racks)}-GPU rack of the {spec.family_name} presets is assumed")
    return max(racks)



def _pair_counts(probe: MachineProbe) -> list[list[int]] | None:
    """NVLink counts as a GPU x GPU matrix (0 on the diagonal), None when no source says where links go."""
    labels = [f"GPU{gpu.index}" for gpu in probe.gpus]
    topo = probe.topo
    if topo is not None and set(labels) <= set(topo.cells):
        return [[0 if a == b else topo.nvlinks_between(a, b) for b in labels] for a in labels]
    if any(link.remote for gpu in probe.gpus for link in gpu.nvlinks):
        return [[0 if a is b else nvlinks_between(a, b) for b in probe.gpus] for a in probe.gpus]
    return None


def _scale_up(probe: MachineProbe, spec: GpuSpec, db: HardwareDB, notes: list[str]) -> ScaleUp:
    n = len(probe.gpus)
    counts = _pair_counts(probe)
    if counts is None and any(gpu.active_nvlinks for gpu in probe.gpus) and n > 1:
        links = min(gpu.active_nvlinks for gpu in probe.gpus)
        notes.append("no topology matrix: assumed every GPU pair is joined by all its NVLinks")
        counts = [[0 if a == b else links for b in range(n)] for a in range(n)]
    pairs = [counts[a][b] for a, b in combinations(range(n), 2)] if counts else []
    if n == 1 or spec.scale_up_link is None or not any(pairs):
        return _pcie_scale_up(probe, spec, db, notes)
    kind, links_used = _nvlink_kind(counts or [], pairs, spec)
    link = db.links[spec.scale_up_link]
    per_link = link.per_link_gb_per_s or (link.bw_gb_per_s or 0.0) / (link.links_per_gpu or 1)
    _note_nvlink_rates(probe, spec, kind, links_used, per_link, notes)
    nvls: InNetworkReduction = "nvls" if kind == "nvswitch" and spec.arch in NVLS_ARCHS and n > 2 else "none"
    if nvls == "nvls":
        notes.append("NVLS assumed available (NVSwitch with a Hopper or newer GPU); `linkscope nccl-log` shows "
                     "whether NCCL uses it")
    return ScaleUp(kind=kind, generation=spec.scale_up_link, bw_gb_per_s=round(per_link * links_used, 3),
                   domain_size=n, in_network_reduction=nvls, links_per_gpu=links_used)


def _nvlink_kind(counts: list[list[int]], pairs: list[int], spec: GpuSpec) -> tuple[ScaleUpKind, int]:
    """(scale-up kind, NVLinks each GPU uses inside the domain)."""
    per_gpu_total = max(sum(row) for row in counts)
    full_links = max(pairs)
    every_pair_full = all(c == full_links for c in pairs)
    if every_pair_full and len(counts) > 2 and full_links * (len(counts) - 1) > (spec.nvlink_links or full_links):
        return "nvswitch", full_links  # more links per GPU than it has: the pairs share links through a switch
    if len(counts) == 2:
        if spec.form_factor in _BRIDGE_FORM_FACTORS:
            return "nvlink-bridge", full_links
        if full_links >= (spec.nvlink_links or full_links + 1):
            return "nvswitch", full_links
    return "nvlink-mesh", per_gpu_total


def _note_nvlink_rates(probe: MachineProbe, spec: GpuSpec, kind: str, links_used: int, per_link: float,
                       notes: list[str]) -> None:
    gpu = probe.gpus[0]
    if gpu.nvlink_reported_gb_per_s is not None:
        rates = sorted({link.gb_per_s for link in gpu.nvlinks if link.active and link.gb_per_s})
        shown = "/".join(f"{r:g}" for r in rates)
        notes.append(f"driver reports {gpu.active_nvlinks} active NVLinks x {shown} GB/s = "
                     f"{gpu.nvlink_reported_gb_per_s:g} GB/s per GPU; using the datasheet {per_link:g} GB/s "
                     f"per link per direction ({spec.scale_up_link}) x {links_used} links")
    short = [f"GPU {g.index}: {g.active_nvlinks} of {spec.nvlink_links} NVLinks active" for g in probe.gpus
             if g.nvlinks and g.active_nvlinks < (spec.nvlink_links or 0)]
    if short:
        notes.append("; ".join(short))
    if kind == "nvlink-mesh":
        notes.append("NVLink mesh: each GPU's NVLink bandwidth is split among its peers")


def _pcie_scale_up(probe: MachineProbe, spec: GpuSpec, db: HardwareDB, notes: list[str]) -> ScaleUp:
    generation = _pcie_generation(probe, spec, db)
    widths = [gpu.pcie_width_max or gpu.pcie_width_current for gpu in probe.gpus]
    width = min((w for w in widths if w), default=16)
    bw = (db.links[generation].bw_gb_per_s or 0.0) * width / 16.0
    if width < 16:
        notes.append(f"GPUs negotiated PCIe x{width}, not x16")
    return ScaleUp(kind="pcie", generation=generation, bw_gb_per_s=round(bw, 3), domain_size=len(probe.gpus))


def _pcie_generation(probe: MachineProbe, spec: GpuSpec, db: HardwareDB) -> str:
    """The PCIe generation all GPUs reach: the lowest `max` generation (current drops at idle to save power)."""
    gens = [gpu.pcie_gen_max or gpu.pcie_gen_current for gpu in probe.gpus]
    known = [g for g in gens if g]
    link_id = f"pcie{min(known)}" if known else spec.pcie
    return link_id if link_id in db.links else spec.pcie


# ---- scale-out --------------------------------------------------------------------------------------------------


def port_fabric(port: RdmaPort) -> Fabric | None:
    """infiniband, roce or efa for an RDMA port; None when the link layer says neither."""
    if (port.driver or "").lower() == "efa":
        return "efa"
    layer = (port.link_layer or "").lower()
    if layer == "infiniband":
        return "infiniband"
    return "roce" if layer == "ethernet" else None


def _active_ports_by_fabric(probe: MachineProbe, notes: list[str]) -> dict[Fabric, list[RdmaPort]]:
    by_fabric: dict[Fabric, list[RdmaPort]] = {}
    for port in probe.rdma_ports:
        port_kind = port_fabric(port)
        if not port.active:
            notes.append(f"{port.device} port {port.port} is {port.state or 'not active'}: not counted")
        elif port_kind is None:
            notes.append(f"{port.device} port {port.port}: link layer '{port.link_layer}' is neither InfiniBand "
                         f"nor Ethernet: not counted")
        else:
            by_fabric.setdefault(port_kind, []).append(port)
    return by_fabric


def _scale_out(probe: MachineProbe, db: HardwareDB, notes: list[str]) -> ScaleOut:
    by_fabric = _active_ports_by_fabric(probe, notes)
    if not by_fabric:
        return _tcp_scale_out(probe, notes)
    fabric = max(by_fabric, key=lambda f: (len(by_fabric[f]), f == "infiniband"))
    ports = _gpu_local_ports(by_fabric[fabric], probe.topo, notes)
    rates = sorted({p.rate_gbit_per_s for p in ports if p.rate_gbit_per_s})
    if len(rates) > 1:
        notes.append(f"{fabric} ports run at different rates ({', '.join(f'{r:g}' for r in rates)} Gbit/s); "
                     f"using the fastest")
    gdr = probe.peermem_module is not None
    notes.append(f"GPUDirect RDMA: {probe.peermem_module} loaded" if gdr else
                 "GPUDirect RDMA not confirmed (no nvidia_peermem module; DMA-BUF may still provide it): "
                 "check `linkscope nccl-log` for /GDRDMA")
    return ScaleOut(fabric=fabric, nics=len(ports), nic_gbit_per_s=rates[-1] if rates else None,
                    gpudirect_rdma=gdr, generation=_fabric_generation(fabric, ports, db, notes),
                    transport="srd" if fabric == "efa" else None)


def _gpu_local_ports(ports: list[RdmaPort], topo: TopoMatrix | None, notes: list[str]) -> list[RdmaPort]:
    """Ports of NICs that sit next to a GPU in the matrix (PIX/PXB); all ports when the matrix shows no NIC."""
    if topo is None or not topo.nics:
        return ports
    local = {topo.nic_device(nic) for nic in topo.nics
             if any(pcie_level(topo.cell(gpu, nic)) in _GPU_LOCAL_LEVELS for gpu in topo.gpus)}
    chosen = [p for p in ports if p.device in local]
    if not chosen:
        return ports
    others = sorted({p.device for p in ports} - local)
    if others:
        notes.append(f"counted only NICs next to a GPU (PIX/PXB in topo -m); not counted: {', '.join(others)}")
    return chosen


def _fabric_generation(fabric: str, ports: list[RdmaPort], db: HardwareDB, notes: list[str]) -> str | None:
    if fabric != "infiniband":
        return fabric if fabric in db.links else None
    names = {p.speed_name for p in ports if p.speed_name}
    if not names:
        rates = {p.rate_gbit_per_s for p in ports if p.rate_gbit_per_s}
        names = {_IB_GEN_BY_4X_RATE[r] for r in rates if r in _IB_GEN_BY_4X_RATE}
        if names:
            notes.append("InfiniBand generation inferred from the port rate, assuming 4X ports")
    link_ids = sorted(f"ib-{name.lower()}" for name in names if f"ib-{name.lower()}" in db.links)
    return link_ids[-1] if len(link_ids) == 1 else None


def _tcp_scale_out(probe: MachineProbe, notes: list[str]) -> ScaleOut:
    nic = fastest_nic(probe.ethernet)
    if nic is None:
        notes.append("no RDMA port and no Ethernet NIC with a known speed: scale-out fabric none")
        return NO_SCALE_OUT
    notes.append(f"no RDMA port: TCP over {nic.name} ({nic.speed_gbit_per_s:g} Gbit/s)")
    return ScaleOut(fabric="tcp", nics=1, nic_gbit_per_s=nic.speed_gbit_per_s, generation="tcp")
