"""The verdict rules of `linkscope check`, as pure functions of what was probed or measured and the expected System.

Each returns CheckItems; nothing here touches the machine, so every rule is tested on recorded outputs.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from linkscope.check.bandwidth import BandwidthContext, busbw_item
from linkscope.check.items import CheckItem, Thresholds
from linkscope.hardware.system import RDMA_FABRICS, System
from linkscope.probe.machine import MachineProbe
from linkscope.probe.nccl_log import NcclLogReport
from linkscope.probe.to_system import port_fabric
from linkscope.results.records import CollectiveRow, PairRow

_MEMORY_PASS_FRACTION = 0.95
"""Drivers report a little less memory than the datasheet (79.6 GiB on an 80 GB H100)."""


def _src(expected: System) -> str:
    return f"expected System {expected.id}"


def _model_fix(probed: System | None, expected: System) -> str:
    """A variant of the promised family (an A100 40 GB for an 80 GB, a PCIe card for an SXM board) is named as
    such: it is the substitution that a name alone hides."""
    fix = "compare `nvidia-smi -L` with the offering; ask the provider for the right node type"
    family = expected.node.gpu.family_name
    if probed is not None and probed.node.gpu.family_name == family:
        return f"another {family} variant than promised (memory, form factor or NVLink differ): {fix}"
    return f"a different GPU model than promised: {fix}"


def gpu_items(probe: MachineProbe, probed: System | None, expected: System) -> list[CheckItem]:
    """GPU count, model and memory against the expected System."""
    src = _src(expected)
    want_n = expected.node.gpus
    have_n = len(probe.gpus) if probe.gpus else (probed.node.gpus if probed is not None and probed.is_cpu_host else 0)
    unit = "CPUs" if expected.is_cpu_host else "GPUs"
    if have_n == want_n:
        count = CheckItem("gpus.count", "PASS", have_n, want_n, unit, src)
    elif have_n < want_n:
        count = CheckItem("gpus.count", "FAIL", have_n, want_n, unit, src,
                          f"{want_n - have_n} {unit} missing: check CUDA_VISIBLE_DEVICES, `nvidia-smi -L`, dmesg for "
                          "Xid errors; ask the provider to replace the node")
    else:
        count = CheckItem("gpus.count", "WARN", have_n, want_n, unit, src,
                          "more than promised: is --expect the right offering?")
    items = [count]
    have_model = probed.node.gpu.id if probed is not None else ", ".join(sorted({g.name for g in probe.gpus})) or None
    want_model = expected.node.gpu.id
    if have_model == want_model:
        items.append(CheckItem("gpus.model", "PASS", have_model, want_model, "", src))
    else:
        items.append(CheckItem("gpus.model", "FAIL", have_model, want_model, "", src, _model_fix(probed, expected)))
    memories = [g.memory_gib for g in probe.gpus if g.memory_gib is not None]
    if not probe.gpus and probed is not None and probed.is_cpu_host:
        memories = [probed.node.gpu.memory_gib] if probed.node.gpu.memory_gib else []
    want_mem = expected.node.gpu.memory_gib
    if not memories or not want_mem:
        items.append(CheckItem("gpus.memory", "SKIP", None, want_mem, "GiB", src, "memory size not reported"))
    else:
        have_mem = round(min(memories), 1)
        ok = have_mem >= _MEMORY_PASS_FRACTION * want_mem
        items.append(CheckItem("gpus.memory", "PASS" if ok else "FAIL", have_mem, want_mem, "GiB", src,
                               "" if ok else "less memory than the datasheet: MIG mode on, or another model variant "
                                             "(`nvidia-smi -q | grep -i mig`)"))
    return items


def nvlink_items(probe: MachineProbe, probed: System | None, expected: System) -> list[CheckItem]:
    """Every NVLink up (from `nvidia-smi nvlink -s` or NVML) and the generation, when NVLink is promised."""
    src = _src(expected)
    su = expected.node.scale_up
    if not su.is_nvlink:
        reason = f"the expected System's scale-up is {su.kind}, no NVLink promised"
        return [CheckItem("nvlink.links", "SKIP", None, None, "links", src, reason)]
    if not probe.gpus:
        return [CheckItem("nvlink.links", "SKIP", None, None, "links", src, "no GPU found on this machine")]
    per_gpu = su.links_per_gpu or expected.node.gpu.nvlink_links or max((len(g.nvlinks) for g in probe.gpus), default=0)
    down = [(g.index, per_gpu - g.active_nvlinks) for g in probe.gpus if g.active_nvlinks < per_gpu]
    active = sum(g.active_nvlinks for g in probe.gpus)
    want = per_gpu * len(probe.gpus)
    if down:
        named = ", ".join(f"GPU{i}: {n} down" for i, n in down)
        links = CheckItem("nvlink.links", "FAIL", active, want, "links up", src,
                          f"NVLink inactive ({named}): run `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e`, check "
                          "the fabric manager, reset the GPU or ask the provider to reseat/replace it")
    else:
        links = CheckItem("nvlink.links", "PASS", active, want, "links up", src)
    items = [links]
    have_gen = probed.node.scale_up.generation if probed is not None else None
    ok = have_gen == su.generation
    items.append(CheckItem("nvlink.generation", "PASS" if ok else "FAIL", have_gen, su.generation, "", src,
                           "" if ok else "a different NVLink generation than promised: another GPU/board variant"))
    return items


def topology_item(probed: System | None, expected: System) -> CheckItem:
    """The scale-up kind (NVSwitch, NVLink mesh, bridge, PCIe, host) against the promise."""
    src = _src(expected)
    want = expected.node.scale_up.kind
    if probed is None:
        return CheckItem("topology.kind", "SKIP", None, want, "", src, "the probe could not build a System")
    have = probed.node.scale_up.kind
    if have == want:
        return CheckItem("topology.kind", "PASS", have, want, "", src)
    return CheckItem("topology.kind", "FAIL", have, want, "", src,
                     f"the GPUs are joined by {have}, not {want}: read `nvidia-smi topo -m`; NVLink links down or a "
                     "PCIe SKU instead of SXM")


def _pair_values(rows: list[PairRow], field: str) -> dict[tuple[int, int], float]:
    """Per unordered pair, the worse of its two directions."""
    out: dict[tuple[int, int], list[float]] = {}
    for row in rows:
        value = getattr(row, field)
        if value is not None:
            out.setdefault((min(row.src, row.dst), max(row.src, row.dst)), []).append(value)
    worse = max if field == "latency_us" else min
    return {pair: worse(values) for pair, values in out.items()}


def pair_items(rows: list[PairRow], thresholds: Thresholds) -> list[CheckItem]:
    """Every pair's bandwidth and latency within the thresholds of the median of its peers; the slowest pair named."""
    src = "median of the other pairs (user thresholds)"
    if not rows:
        return [CheckItem("p2p.bandwidth", "SKIP", None, None, "GB/s", src, "no pairwise matrix measured")]
    items = []
    for name, field, unit in (("p2p.bandwidth", "uni_gb_per_s", "GB/s"), ("p2p.latency", "latency_us", "us")):
        values = _pair_values(rows, field)
        if len(values) < 2:
            only = next(iter(values.values()), None)
            items.append(CheckItem(name, "SKIP", _round(only), None, unit, src,
                                   "only one pair: no peers to compare it with"))
            continue
        lower_is_better = field == "latency_us"
        pair, worst = (max if lower_is_better else min)(values.items(), key=lambda kv: kv[1])
        peers = median(v for p, v in values.items() if p != pair)
        pct = (peers / worst if lower_is_better else worst / peers) * 100.0 if worst and peers else 0.0
        status = thresholds.status(pct)
        fix = "" if status == "PASS" else (
            f"slow pair GPU{pair[0]}<->GPU{pair[1]} at {pct:.0f}% of its peers: check `nvidia-smi topo -m` for that "
            "pair, NVLink errors (`nvidia-smi nvlink -e`), PCIe link width (`lspci -vv`)")
        items.append(CheckItem(name, status, _round(worst), _round(peers), unit, src, fix))
    return items


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def collective_items(rows: list[CollectiveRow], predicted: dict[str, dict[int, Any]] | None, reason: str,
                     thresholds: Thresholds, source: str, context: BandwidthContext | None = None) -> list[CheckItem]:
    """Per op: busbw at the largest size (or a published floor's size) and latency at the smallest against the
    model's prediction, and no wrong results. `predicted[op][size_bytes]` has `busbw` and `time_us`; None with
    `reason` when the model cannot say. `context` adds the plateau, the health-check floors and runs that cannot be
    compared at all."""
    ctx = context or BandwidthContext()
    items: list[CheckItem] = []
    wrong = sum(r.nwrong or 0 for r in rows)
    if rows:
        items.append(CheckItem("collective.correctness", "PASS" if wrong == 0 else "FAIL", wrong, 0, "wrong elements",
                               "exact result of the reduction",
                               "" if wrong == 0 else "wrong results: faulty GPU memory or link (check dmesg for Xid, "
                                                     "run `nvidia-smi -q -d ECC`)"))
    for op in sorted({r.op for r in rows}):
        op_rows = [r for r in rows if r.op == op and r.size_bytes > 0]
        if not op_rows:
            continue
        pred = (predicted or {}).get(op)
        items.append(busbw_item(op, op_rows, pred, reason, thresholds, source, ctx))
        items.append(_latency_item(op, op_rows, pred, reason, thresholds, source, ctx))
    return items


LATENCY_MAX_BYTES = 1 << 20
"""Above this the time of one operation says more about bandwidth than about latency."""


def _latency_item(op: str, op_rows: list[CollectiveRow], pred: dict[int, Any] | None, reason: str,
                  thresholds: Thresholds, source: str, ctx: BandwidthContext) -> CheckItem:
    """Latency at the smallest size (out-of-place, as nccl-tests' first column) against the prediction."""
    small = min((r for r in op_rows if r.placement == "out_of_place"), default=None, key=lambda r: r.size_bytes) \
        or min(op_rows, key=lambda r: r.size_bytes)
    name = f"{op}.latency@{small.size_bytes}B"
    if ctx.not_comparable or not pred:
        return CheckItem(name, "SKIP", round(small.time_us, 2), None, "us", source, ctx.not_comparable or reason)
    if small.size_bytes > LATENCY_MAX_BYTES:
        return CheckItem(name, "SKIP", round(small.time_us, 2), None, "us", source,
                         f"the smallest size measured is {small.size_bytes} bytes: latency is judged at small "
                         "messages (a sweep from 8 bytes has them)")
    want_us = float(pred[small.size_bytes].time_us)
    pct = want_us / small.time_us * 100.0 if small.time_us > 0 else 0.0
    status = thresholds.status(pct)
    return CheckItem(name, status, round(small.time_us, 2), round(want_us, 2), "us", source,
                     "" if status == "PASS" else f"latency at {pct:.0f}% of the prediction: CPU frequency scaling, "
                                                 "busy host, NCCL_PROTO/NCCL_ALGO overrides")


def transport_items(report: NcclLogReport | None, reason: str) -> list[CheckItem]:
    """The NCCL log of the run: the expected paths, no SHM or socket fallback (nccl_findings' rules)."""
    src = "NCCL log of the run against the expected System"
    if report is None:
        return [CheckItem("transport", "SKIP", None, None, "", src, reason)]
    transports = ", ".join(f"{k} x{v}" for k, v in report.transports().items()) or None
    items = [CheckItem(f"transport.{f.code}", "FAIL" if f.severity in ("fallback", "error") else "WARN", transports,
                       "intended paths", "", src, f.message) for f in report.findings if f.severity != "ok"]
    if not items:
        items.append(CheckItem("transport", "PASS", transports, "intended paths", "", src))
    return items


def scale_out_items(probe: MachineProbe, expected: System, internode_busbw: float | None = None,
                    thresholds: Thresholds | None = None) -> list[CheckItem]:
    """RDMA ports active at the expected rate (sysfs), and across nodes busbw against the NIC rate, judged by the
    user's `thresholds` (--pass-pct/--warn-pct) like every other measured item."""
    src = _src(expected)
    so = expected.node.scale_out
    if so.fabric not in RDMA_FABRICS:
        return [CheckItem("scale_out.ports", "SKIP", None, None, "ports", src,
                          f"the expected System's scale-out is {so.fabric}: no RDMA port to check")]
    ports = [p for p in probe.rdma_ports if port_fabric(p) == so.fabric]
    active = [p for p in ports if p.active]
    down = [p for p in ports if not p.active]
    named_down = ", ".join(f"{p.device}/{p.port} {p.state or '?'}" for p in down)
    if len(active) >= so.nics and down:
        items = [CheckItem("scale_out.ports", "WARN", len(active), so.nics, f"{so.fabric} ports active", src,
                           f"ports not active ({named_down}), enough others are: check the cable if NCCL should use "
                           "them (`ibstat`)")]
    elif len(active) >= so.nics:
        items = [CheckItem("scale_out.ports", "PASS", len(active), so.nics, f"{so.fabric} ports active", src)]
    else:
        items = [CheckItem("scale_out.ports", "FAIL", len(active), so.nics, f"{so.fabric} ports active", src,
                           f"ports not active ({named_down or 'none found'}): check cables and the switch port, "
                           "`ibstat`, the subnet manager (`sminfo`)")]
    if so.nic_gbit_per_s is not None and active:
        slow = [p for p in active if (p.rate_gbit_per_s or 0.0) < so.nic_gbit_per_s]
        worst = min(p.rate_gbit_per_s or 0.0 for p in active)
        fix = "" if not slow else (
            "ports below the promised rate (" + ", ".join(f"{p.device}/{p.port} {p.rate_text or p.rate_gbit_per_s}"
                                                          for p in slow)
            + "): a cable or transceiver negotiated a lower speed; reseat or replace it")
        items.append(CheckItem("scale_out.rate", "FAIL" if slow else "PASS", worst, so.nic_gbit_per_s, "Gbit/s",
                               src, fix))
    if expected.nodes > 1 and internode_busbw is not None:
        per_gpu = expected.node.scale_out_gb_per_s_per_gpu()
        if per_gpu:
            pct = internode_busbw / per_gpu * 100.0
            status = (thresholds or Thresholds()).status(pct)
            items.append(CheckItem("scale_out.busbw", status, round(internode_busbw, 3), round(per_gpu, 3), "GB/s",
                                   "NIC rate per GPU", "" if status == "PASS" else "GPUDirect RDMA off? see transport"))
    else:
        items.append(CheckItem("scale_out.busbw", "SKIP", None, None, "GB/s", "NIC rate per GPU",
                               "single-node run: nothing crosses the network"))
    return items


FABRIC_FIX = ("the fabric manager has not put this tray's GPUs into one clique of the rack's NVLink fabric: check "
              "`nvidia-smi -q` (Fabric State Completed, Status Success, one CliqueId and ClusterUUID on every GPU), "
              "the fabric manager on the NVSwitch trays, and ask the provider to re-register the tray")
IMEX_FIX = ("NCCL joins trays over NVLink only inside an IMEX domain: start the nvidia-imex service on every tray "
            "of the job with the same nodes_config.cfg (/etc/nvidia-imex/nodes_config.cfg lists every tray's "
            "address), then `nvidia-imex-ctl -N` shows every node READY, every pair C and Domain State UP")
CHANNEL_FIX = ("no IMEX channel (/dev/nvidia-caps-imex-channels/channel0): create it (mknod with the major number "
               "of nvidia-caps-imex-channels in /proc/devices) or pass it into the container; without it NCCL "
               "reports `MNNVL ... is available but not working` or runs tray-to-tray traffic on the NICs")


def fabric_items(probe: MachineProbe, expected: System) -> list[CheckItem]:
    """Where the expected NVLink domain spans nodes (GB200/GB300 NVL72 trays): every GPU of this tray in one
    clique of the fabric, registered without error; the IMEX domain up over the domain's trays; an IMEX channel.
    Nothing to judge on other Systems."""
    if not expected.domain_spans_nodes:
        return []
    src = _src(expected)
    return [_clique_item(probe, src), *_imex_items(probe, expected, src)]


def _clique_item(probe: MachineProbe, src: str) -> CheckItem:
    fabric = probe.fabric
    if fabric is None or not fabric.reported:
        why = "no Fabric state reported (`nvidia-smi -q`): a driver without fabric reporting, or no fabric at all"
        return CheckItem("fabric.clique", "FAIL", None, "one clique, Completed/Success", "", src,
                         f"{why}; {FABRIC_FIX}")
    states = sorted({f"{g.state or '?'}/{g.status or '?'}" for g in fabric.gpus})
    if fabric.in_one_domain:
        (cluster, clique), = fabric.cliques
        unhealthy = sorted({g.health for g in fabric.gpus if g.health and g.health.lower() != "healthy"})
        measured = f"clique {clique} of {cluster}, {', '.join(states)}"
        if unhealthy:
            return CheckItem("fabric.clique", "WARN", measured, "one clique, Completed/Success", "", src,
                             f"fabric health {', '.join(unhealthy)}: degraded bandwidth or routes (`nvidia-smi -q` "
                             "Fabric Health); ask the provider to check the NVSwitch trays")
        return CheckItem("fabric.clique", "PASS", measured, "one clique, Completed/Success", "", src)
    cliques = len(fabric.cliques)
    measured = f"{', '.join(states)}; {cliques} clique{'s' if cliques != 1 else ''}"
    return CheckItem("fabric.clique", "FAIL", measured, "one clique, Completed/Success", "", src, FABRIC_FIX)


def _imex_items(probe: MachineProbe, expected: System, src: str) -> list[CheckItem]:
    imex = probe.imex
    want = f"UP, {expected.nodes_per_domain} nodes READY"
    if imex is None or imex.source == "none":
        why = "; ".join(imex.errors) if imex is not None and imex.errors else "IMEX not found"
        return [CheckItem("imex.domain", "FAIL", None, want, "", src, f"{why}: {IMEX_FIX}")]
    if imex.source == "files":
        domain = CheckItem("imex.domain", "WARN", f"{imex.node_count or 0} nodes configured", want, "", src,
                           "`nvidia-imex-ctl -N` did not answer, so whether the domain is up is unknown: " + IMEX_FIX)
    elif not imex.up:
        down = [f"node {n.index} ({n.address}) {n.state}" for n in imex.nodes if n.state != "READY"]
        cut = [f"{a}->{b} {cell}" for a, b, cell in imex.unconnected[:6]]
        measured = f"{imex.domain_state or '?'}, {sum(n.state == 'READY' for n in imex.nodes)} of " \
                   f"{len(imex.nodes)} nodes READY"
        domain = CheckItem("imex.domain", "FAIL", measured, want, "", src,
                           f"{'; '.join(down + cut) or 'domain not UP'}: {IMEX_FIX}")
    else:
        measured = f"UP, {len(imex.nodes)} nodes READY"
        fewer = len(imex.nodes) < expected.nodes_per_domain
        domain = CheckItem("imex.domain", "WARN" if fewer else "PASS", measured, want, "", src,
                           f"the IMEX domain joins {len(imex.nodes)} of the rack's {expected.nodes_per_domain} "
                           "trays: NVLink reaches those only" if fewer else "")
    channel = CheckItem("imex.channel", "PASS" if imex.channels else "FAIL", ", ".join(imex.channels) or None,
                        "channel0", "", src, "" if imex.channels else CHANNEL_FIX)
    return [domain, channel]
