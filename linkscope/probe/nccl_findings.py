"""Verdicts on an NCCL log: which transports are the intended ones, and which are silent fallbacks.

The rules follow what NCCL's format strings reveal: SHM between GPUs that have NVLink means P2P is off or failed;
NET/Socket where InfiniBand is present means a TCP fallback; NET/IB without /GDRDMA, or `GDR 0`, means no
GPUDirect RDMA; `NVLS multicast support is not available` or `0 nvls channels` on Hopper or newer NVSwitch systems
means NVLS is not used; `X set by environment to Y` is a user override. How strict a rule is depends on what the
machine is expected to have (`Expectations`); unknown expectations give warnings rather than fallbacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from collections.abc import Callable

from linkscope.hardware.system import RDMA_FABRICS, System
from linkscope.probe.nccl_lines import ParsedLog
from linkscope.probe.nccl_pairs import MNNVL_PATH, PairSummary, net_family, rank_hosts

Severity = Literal["ok", "warning", "fallback", "error"]
SEVERITY_RANK: dict[str, int] = {"ok": 0, "warning": 1, "fallback": 2, "error": 3}
IB_WC_STATUS = {1: "local length error", 2: "local QP operation error", 4: "local protection error",
                5: "work request flushed (the QP was already in error)", 9: "remote invalid request",
                10: "remote access error", 11: "remote operation error", 12: "transport retry counter exceeded",
                13: "RNR retry counter exceeded"}
"""ibv_wc_status codes (libibverbs verbs.h) NCCL prints after `Got completion from peer ... with status=`."""
_EVIDENCE_LINES = 5

TRANSPORT_KNOBS = frozenset({
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_CUMEM_ENABLE",
    "NCCL_PXN_DISABLE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS",
    "NCCL_NET_DISABLE_INTRA", "NCCL_P2P_USE_CUDA_MEMCPY",
})
"""Environment variables that change which transport, algorithm or channel count NCCL may pick."""


@dataclass(frozen=True)
class Expectations:
    """What the machine should give NCCL; None = unknown (findings then warn instead of calling a fallback)."""

    nvlink: bool | None = None
    """GPUs of one node are joined by NVLink, so intra-node pairs should use P2P."""
    ib: bool | None = None
    """Nodes are joined by RDMA (InfiniBand or RoCE through NET/IB, or EFA), so NET/Socket is a fallback."""
    nvls: bool | None = None
    """NVSwitch with NVLS (H100/H200/B200 and newer), so NVLS channels should exist."""
    mnnvl: bool | None = None
    """An NVLink domain spans the hosts (GB200/GB300 NVL72 trays), so NCCL should join them over NVLink (MNNVL)."""
    gdr: bool | None = None
    """The NICs do GPUDirect RDMA; False where the System has none (g5, g6e: EFA without it), so RDMA without
    /GDRDMA is what it promises, not a fallback."""

    @classmethod
    def from_system(cls, system: System) -> Expectations:
        """What a System promises: NVLink scale-up, an RDMA fabric (with or without GPUDirect RDMA), NVLS, NVLink
        across its nodes."""
        so = system.node.scale_out
        fabric = so.fabric
        return cls(nvlink=system.node.scale_up.is_nvlink,
                   ib=True if fabric in RDMA_FABRICS else (False if fabric == "tcp" else None),
                   nvls=system.node.scale_up.in_network_reduction == "nvls",
                   mnnvl=True if system.domain_spans_nodes else None,
                   gdr=so.gpudirect_rdma if fabric in RDMA_FABRICS else None)


@dataclass(frozen=True)
class Finding:
    """One verdict with the log lines that show it."""

    severity: Severity
    code: str
    message: str
    lines: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"severity": self.severity, "code": self.code, "message": self.message, "lines": list(self.lines)}


def _by_expectation(expected: bool | None, yes: Severity, unknown: Severity, no: Severity) -> Severity:
    return yes if expected else (unknown if expected is None else no)


def _evidence(pairs: list[PairSummary]) -> tuple[int, ...]:
    return tuple(sorted({line for pair in pairs for line in pair.lines})[:_EVIDENCE_LINES])


def _pair_names(pairs: list[PairSummary]) -> str:
    shown = ", ".join(f"{p.src_rank}->{p.dst_rank}" for p in pairs[:6])
    return shown + (f" (+{len(pairs) - 6} more)" if len(pairs) > 6 else "")


def shm_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """SHM inside a node: P2P disabled or failed where NVLink (or PCIe P2P) should carry the traffic."""
    shm = [p for p in pairs if p.uses("SHM")]
    if not shm:
        return []
    severity = _by_expectation(expect.nvlink, "fallback", "warning", "ok")
    why = {"fallback": "NVLink is expected, so P2P is disabled or failed (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, "
                       "no peer access in the VM or container)",
           "warning": "on a machine with NVLink this is a fallback (P2P disabled or failed)",
           "ok": "expected where the GPUs cannot reach each other directly"}[severity]
    return [Finding(severity, "shm-instead-of-p2p",
                    f"{len(shm)} rank pairs inside a node use SHM (copies through host memory): {_pair_names(shm)}; "
                    f"{why}", _evidence(shm))]


def net_inside_node_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """Ranks on one host talking through the network: neither P2P nor SHM could be used."""
    same = [p for p in pairs if p.same_host and p.uses("NET/")]
    if not same:
        return []
    severity = _by_expectation(expect.nvlink, "fallback", "warning", "warning")
    return [Finding(severity, "net-inside-node",
                    f"{len(same)} pairs of ranks on the same host go through the network ({_pair_names(same)}): "
                    f"P2P and SHM are both unavailable or disabled", _evidence(same))]


def socket_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """NET/Socket between nodes: a TCP fallback when InfiniBand/RoCE is present or expected."""
    sockets = [p for p in pairs if p.uses("NET/Socket") and not p.same_host]
    if not sockets:
        return []
    ib_listed = any(dev.net.startswith("IB") for dev in log.net_devices)
    severity = _by_expectation(True if ib_listed else expect.ib, "fallback", "warning", "ok")
    detail = ("although RDMA devices are listed or expected: NCCL_IB_DISABLE, a missing or broken plugin, or "
              "no usable HCA" if severity == "fallback" else "kernel TCP, far slower than RDMA")
    return [Finding(severity, "socket-transport",
                    f"{len(sockets)} rank pairs use TCP sockets (NET/Socket): {_pair_names(sockets)}; {detail}",
                    _evidence(sockets))]


def no_device_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """`NET/IB : No device found.`: NCCL found no usable InfiniBand/RoCE device."""
    if not log.no_device:
        return []
    severity = _by_expectation(expect.ib, "fallback", "warning", "ok")
    nets = ", ".join(sorted({name for _, name in log.no_device}))
    return [Finding(severity, "no-rdma-device",
                    f"NET/{nets}: no device found; NCCL falls back to sockets between nodes",
                    tuple(line for line, _ in log.no_device[:_EVIDENCE_LINES]))]


def gdr_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """RDMA transport with or without /GDRDMA on its channels."""
    rdma = [p for p in pairs if any(net_family(path) in ("ib", "efa") for path in p.channels_by_path)]
    without = [p for p in rdma if p.gdrdma_channels < p.net_channels]
    findings = []
    if without and expect.gdr is False:
        findings.append(Finding("ok", "no-gdrdma-expected",
                                f"{len(without)} rank pairs use RDMA without GPUDirect RDMA, as this machine "
                                f"promises: its NICs do not do GPUDirect RDMA", _evidence(without)))
    elif without:
        findings.append(Finding("fallback", "no-gdrdma",
                                f"{len(without)} rank pairs use RDMA without GPUDirect RDMA (no /GDRDMA): "
                                f"{_pair_names(without)}; data is staged through host memory (nvidia_peermem not "
                                f"loaded, NIC too far from the GPU for NCCL_NET_GDR_LEVEL, or GDR disabled)",
                                _evidence(without)))
    with_gdr = [p for p in rdma if p not in without]
    if with_gdr:
        paths = sorted({path for p in with_gdr for path in p.channels_by_path if path.startswith("NET/")})
        findings.append(Finding("ok", "gdrdma", f"{len(with_gdr)} rank pairs use {', '.join(paths)} with GPUDirect "
                                                f"RDMA", _evidence(with_gdr)))
    return findings


def rings_gdr_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """`Connected all rings, use ring PXN x GDR 0` on a communicator that uses the network."""
    off = [line for line, _, gdr in log.rings if gdr == 0]
    # GDR only matters for traffic through a NIC; a single-node communicator may print GDR 0 harmlessly.
    crosses_nodes = any(p.net_channels for p in pairs) or _nnodes(log) > 1
    if not off or not crosses_nodes:
        return []
    if expect.gdr is False:
        return [Finding("ok", "gdr-off-expected", "`Connected all rings ... GDR 0`: no GPUDirect RDMA, as this "
                                                  "machine promises", tuple(off[:_EVIDENCE_LINES]))]
    return [Finding("fallback", "gdr-disabled",
                    "`Connected all rings ... GDR 0`: GPUDirect RDMA is off for this communicator",
                    tuple(off[:_EVIDENCE_LINES]))]


def _nnodes(log: ParsedLog) -> int:
    return max((c.nnodes or 1 for c in log.comms), default=1)


def nvls_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """NVLS unavailable or unused (a fallback on Hopper-or-newer NVSwitch systems)."""
    unavailable = [line for line, available in log.nvls_support if not available]
    zero = [line for line, counts in log.channel_counts if counts.get("nvls") == 0]
    used = sorted([line for line, counts in log.channel_counts if counts.get("nvls", 0) > 0] + log.nvls_comm_lines)
    severity = _by_expectation(expect.nvls, "fallback", "warning", "ok")
    context = {"fallback": "this machine should support it (fabric manager, IMEX or driver problem?)",
               "warning": "a fallback on H100/H200/B200 NVSwitch systems; expected on older GPUs",
               "ok": "not expected on this machine"}[severity]
    if unavailable:
        return [Finding(severity, "nvls-unavailable", f"NVLS multicast support is not available; {context}",
                        tuple(unavailable[:_EVIDENCE_LINES]))]
    if zero and not used:
        return [Finding(severity, "nvls-unused", f"0 nvls channels: NVLS is not used; {context}",
                        tuple(zero[:_EVIDENCE_LINES]))]
    if used:
        return [Finding("ok", "nvls", "NVLS is in use", tuple(used[:_EVIDENCE_LINES]))]
    return []


MNNVL_FIX = ("on every tray: `nvidia-smi -q` Fabric State Completed and Status Success in one clique (the fabric "
             "manager), `nvidia-imex-ctl -N` Domain State UP with every node READY (the IMEX service and its "
             "nodes_config.cfg), and an IMEX channel (/dev/nvidia-caps-imex-channels/channel0) in the job's "
             "container; NCCL_MNNVL_ENABLE=1 makes NCCL stop instead of falling back")


@dataclass(frozen=True)
class MnnvlSummary:
    """What a log says about NVLink between hosts: NCCL's MNNVL flag, the clique, and how host pairs connect."""

    enabled: bool | None
    """True: NCCL uses multi-node NVLink; False: it said MNNVL 0; None: the log does not say."""
    clique_size: int | None
    hosts: int
    pairs_over_nvlink: int
    """Rank pairs on different hosts joined by P2P/MNNVL."""
    pairs_over_net: list[PairSummary]
    """Rank pairs on different hosts joined through the network."""
    nvls_across_hosts: bool
    """NVLS in use in a communicator whose ranks NCCL joins over NVLink across hosts."""
    not_working: tuple[int, ...] = ()
    """Lines of NCCL's `MNNVL ... is available but not working` warning."""

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"enabled": self.enabled, "clique_size": self.clique_size, "hosts": self.hosts,
                "pairs_over_nvlink": self.pairs_over_nvlink, "pairs_over_net": len(self.pairs_over_net),
                "nvls_across_hosts": self.nvls_across_hosts, "not_working_lines": list(self.not_working)}


def mnnvl_summary(log: ParsedLog, pairs: list[PairSummary]) -> MnnvlSummary:
    """NVLink between hosts as the log shows it: `MNNVL 1` (the clique line or the comm line), P2P/MNNVL pairs."""
    cross = [p for p in pairs if p.same_host is False]
    over_nvlink = sum(1 for p in cross if p.uses(MNNVL_PATH))
    flags = [c.enabled for c in log.mnnvl_cliques] + [c.mnnvl == 1 for c in log.comms if c.mnnvl is not None]
    enabled = True if any(flags) or over_nvlink else (False if flags else None)
    hosts = {h for h in rank_hosts(log).values()} | {c.host for c in log.mnnvl_fabric if c.host}
    nvls_used = any(counts.get("nvls", 0) > 0 for _, counts in log.channel_counts) or bool(log.nvls_comm_lines)
    return MnnvlSummary(enabled, max((c.clique_size for c in log.mnnvl_cliques), default=None), len(hosts),
                        over_nvlink, [p for p in cross if p.uses("NET/")],
                        bool(enabled) and nvls_used and (len(hosts) > 1 or over_nvlink > 0),
                        tuple(line for line, msg in log.warns if "MNNVL" in msg and "not working" in msg))


def mnnvl_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """NVLink between the hosts of one NVLink domain (MNNVL), or its silent fallback to the network."""
    m = mnnvl_summary(log, pairs)
    findings = _fabric_findings(log)
    if m.not_working:
        findings.append(Finding("fallback", "mnnvl-not-working", "NCCL found multi-node NVLink available but not "
                                f"working (no IMEX channel, or an IMEX domain that is not up); check {MNNVL_FIX}",
                                m.not_working[:_EVIDENCE_LINES]))
    lines = tuple(sorted({line for p in m.pairs_over_net for line in p.lines})[:_EVIDENCE_LINES])
    one_clique = m.clique_size is not None and m.clique_size >= (max((c.nranks for c in log.comms), default=0))
    if m.enabled:
        nvls = "; NVLS across hosts" if m.nvls_across_hosts else ""
        findings.append(Finding("ok", "mnnvl", f"multi-node NVLink (MNNVL) in use: clique of {m.clique_size or '?'} "
                                f"ranks, {m.pairs_over_nvlink} rank pairs between hosts over P2P/MNNVL{nvls}",
                                tuple(c.line for c in log.mnnvl_cliques[:_EVIDENCE_LINES])))
        if m.pairs_over_net and one_clique:
            findings.append(Finding("fallback", "mnnvl-pairs-over-net",
                                    f"{len(m.pairs_over_net)} rank pairs between hosts of one NVLink clique go "
                                    f"through the network ({_pair_names(m.pairs_over_net)})", lines))
    elif expect.mnnvl and (m.enabled is False or m.pairs_over_net):
        what = (f"{len(m.pairs_over_net)} rank pairs between trays of the NVLink domain go through the network "
                f"({_pair_names(m.pairs_over_net)})" if m.pairs_over_net else "NCCL printed MNNVL 0")
        findings.append(Finding("fallback", "mnnvl-fallback", f"multi-node NVLink not used: {what}; the traffic "
                                f"between trays runs on the NICs. Check {MNNVL_FIX}",
                                lines or tuple(c.line for c in log.comms if c.mnnvl == 0)[:_EVIDENCE_LINES]))
    elif m.enabled is False and any(f.state == 3 and f.clique_id for f in log.mnnvl_fabric):
        findings.append(Finding("warning", "mnnvl-off", "the GPUs registered in an NVLink fabric clique, but NCCL "
                                "did not use multi-node NVLink (MNNVL 0)",
                                tuple(f.line for f in log.mnnvl_fabric[:_EVIDENCE_LINES])))
    return findings


FABRIC_STATE_COMPLETED = 3
"""NVML_GPU_FABRIC_STATE_COMPLETED: the GPU finished registering with the NVLink fabric."""


def _fabric_findings(log: ParsedLog) -> list[Finding]:
    """What NCCL read of the GPUs' NVLink fabric registration (`MNNVL busId ... state ...`)."""
    if not log.mnnvl_fabric:
        return []
    lines = tuple(f.line for f in log.mnnvl_fabric[:_EVIDENCE_LINES])
    pending = [f for f in log.mnnvl_fabric if f.state != FABRIC_STATE_COMPLETED]
    if pending:
        return [Finding("warning", "mnnvl-fabric-pending", f"{len(pending)} of {len(log.mnnvl_fabric)} GPUs had not "
                        f"finished registering with the NVLink fabric (state {pending[0].state}, not 3): NCCL cannot "
                        f"join them over NVLink across hosts", tuple(f.line for f in pending[:_EVIDENCE_LINES]))]
    cliques = sorted({(f.fabric_uuid, f.clique_id) for f in log.mnnvl_fabric})
    where = ", ".join(f"clique 0x{clique:x} of fabric {uuid}" for uuid, clique in cliques[:3])
    in_fabric = [f for f in log.mnnvl_fabric if f.clique_id and set(f.fabric_uuid) - {"0", "."}]
    if not in_fabric:
        return [Finding("ok", "mnnvl-no-fabric", "the GPUs are in no NVLink fabric beyond their node (zero fabric "
                        "UUID): no multi-node NVLink", lines)]
    return [Finding("ok", "mnnvl-fabric", f"{len(log.mnnvl_fabric)} GPUs registered with the NVLink fabric "
                    f"(state 3, completed): {where}", lines)]


def env_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """`X set by environment to Y`: overrides of NCCL's own choices."""
    seen: dict[tuple[str, str], int] = {}
    for line, name, value in log.env:
        seen.setdefault((name, value), line)
    findings = [Finding("warning", "env-override", f"{name}={value} set by environment: overrides NCCL's choice of "
                                                   f"transport, algorithm or channels", (line,))
                for (name, value), line in seen.items() if name in TRANSPORT_KNOBS]
    others = [(name, value, line) for (name, value), line in seen.items() if name not in TRANSPORT_KNOBS]
    if others:
        findings.append(Finding("ok", "env-settings", "set by environment: " +
                                ", ".join(f"{name}={value}" for name, value, _ in others),
                                tuple(line for _, _, line in others[:_EVIDENCE_LINES])))
    return findings


def p2p_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """Pairs that use P2P (NVLink or PCIe peer access), the intended intra-node transport."""
    p2p = [p for p in pairs if p.uses("P2P")]
    if not p2p:
        return []
    paths = sorted({path for p in p2p for path in p.channels_by_path if path.startswith("P2P")})
    note = "; P2P/indirect relays through another GPU" if "P2P/indirect" in paths else ""
    return [Finding("ok", "p2p", f"{len(p2p)} rank pairs use {', '.join(paths)}{note}", _evidence(p2p))]


def network_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """Which network NCCL selected and its devices (InfiniBand, RoCE, SHARP)."""
    if not log.networks and not log.net_devices and not log.ofi_providers:
        return []
    names = sorted({name for _, name in log.networks})
    providers = sorted({name for _, name in log.ofi_providers})
    if providers:
        names.append("libfabric provider " + ", ".join(f"{p} ({_PROVIDERS.get(p, 'libfabric')})" for p in providers))
    devices = sorted({f"{d.name}:{d.port}/{d.link_layer}" + ("/SHARP" if d.sharp else "") if d.port is not None
                      else d.name for d in log.net_devices})
    text = f"network: {', '.join(names) or 'not stated'}" + (f"; devices {', '.join(devices)}" if devices else "")
    lines = [line for line, _ in log.networks] + [d.line for d in log.net_devices] + \
        [line for line, _ in log.ofi_providers]
    return [Finding("ok", "network", text, tuple(sorted(set(lines))[:_EVIDENCE_LINES]))]


_PROVIDERS = {"efa": "AWS EFA", "cxi": "HPE Slingshot", "verbs": "InfiniBand verbs", "tcp": "TCP sockets",
              "sockets": "TCP sockets"}


def net_error_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """`NET/IB : Got completion from peer ... with status=12`: a network operation failed; NCCL aborts the
    communicator (the run died, whatever else the log says)."""
    if not log.net_errors:
        return []
    statuses = sorted({status for _, status, _ in log.net_errors})
    named = ", ".join(f"{s} ({IB_WC_STATUS.get(s, 'see ibv_wc_status')})" for s in statuses)
    return [Finding("error", "net-completion-error",
                    f"{len(log.net_errors)} failed network completions (status {named}): the transfer failed and "
                    "NCCL aborted; check the link and switch port (`ibstat`, port error counters), the peer named "
                    "in the line, and the GID/RoCE settings",
                    tuple(line for line, _, _ in log.net_errors[:_EVIDENCE_LINES]))]


def collnet_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """CollNet (in-network reduction such as SHARP) connections."""
    if not log.collnet:
        return []
    paths = sorted({c.path for c in log.collnet})
    return [Finding("ok", "collnet", f"CollNet in use ({', '.join(paths)})",
                    tuple(c.line for c in log.collnet[:_EVIDENCE_LINES]))]


def health_rule(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """NCCL warnings, unreadable NCCL lines, and logs that carry no transport lines at all."""
    findings = []
    if log.nccl_lines == 0:
        findings.append(Finding("warning", "no-nccl-lines", "no NCCL lines found: run with NCCL_DEBUG=INFO"))
    elif not log.connections:
        findings.append(Finding("warning", "no-connections", "no `Channel ... via ...` lines: the transports are not "
                                                             "visible (a single rank, or output cut short)"))
    if log.warns:
        findings.append(Finding("warning", "nccl-warn", f"NCCL printed {len(log.warns)} warnings, first: "
                                                        f"{log.warns[0][1]}",
                                tuple(line for line, _ in log.warns[:_EVIDENCE_LINES])))
    if log.problems:
        findings.append(Finding("warning", "unreadable-lines", f"{len(log.problems)} NCCL lines could not be read",
                                tuple(p.line for p in log.problems[:_EVIDENCE_LINES] if p.line is not None)))
    return findings


Rule = Callable[[ParsedLog, list[PairSummary], Expectations], list[Finding]]
RULES: tuple[Rule, ...] = (net_error_rule, shm_rule, net_inside_node_rule, socket_rule, no_device_rule, gdr_rule,
                           rings_gdr_rule, nvls_rule, mnnvl_rule, env_rule, p2p_rule, network_rule, collnet_rule,
                           health_rule)


def find_fallbacks(log: ParsedLog, pairs: list[PairSummary], expect: Expectations) -> list[Finding]:
    """Every rule's findings, errors first, then fallbacks, warnings, and what is as intended."""
    findings = [finding for rule in RULES for finding in rule(log, pairs, expect)]
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])
