"""Analyse `NCCL_DEBUG=INFO` output: the transport each pair of ranks uses, the network NCCL selected, and the
silent fallbacks (SHM instead of NVLink, sockets instead of InfiniBand, no GPUDirect RDMA, no NVLS).

`analyse_nccl_log(text, expect)` is the library entry point (used on the output of NCCL runs);
`read_nccl_log(path, expect)` reads a file first, and refuses one with no NCCL lines at all.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from linkscope.hardware.errors import UserError, read_input_bytes
from linkscope.probe.nccl_findings import (SEVERITY_RANK, Expectations, Finding, MnnvlSummary, Severity,
                                           find_fallbacks, mnnvl_summary)
from linkscope.probe.nccl_lines import ParsedLog, SizeChoice, choices_by_size, parse_log
from linkscope.probe.nccl_pairs import PairSummary, summarise_pairs


@dataclass
class NcclLogReport:
    """Everything read from one log plus the verdicts."""

    source: str
    log: ParsedLog
    pairs: list[PairSummary] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    expectations: Expectations = field(default_factory=Expectations)

    @property
    def worst(self) -> Severity:
        """The most serious finding's severity (`ok` when there is none)."""
        return max((f.severity for f in self.findings), key=SEVERITY_RANK.__getitem__, default="ok")

    @property
    def fallbacks(self) -> list[Finding]:
        """Findings of severity `fallback`."""
        return [f for f in self.findings if f.severity == "fallback"]

    @property
    def errors(self) -> list[Finding]:
        """Findings of severity `error`: the run failed (a network completion error, ...)."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def nranks(self) -> int | None:
        """Ranks of the largest communicator, from the `comm ... nRanks` lines and the `comm 0x.. nRanks N` suffix
        of Channel, Trees and rings lines."""
        sizes = [c.nranks for c in self.log.comms] + [n for _, _, n in self.log.comm_sizes]
        return max(sizes, default=None)

    @property
    def hosts(self) -> list[str]:
        """The host names the log's line prefixes name, each once."""
        return list(self.log.hosts)

    @property
    def nnodes(self) -> int | None:
        """Nodes of the largest communicator where the log states it (NCCL 2.1x and later), else the hosts the log
        names when there are several (one name may stand for several nodes, `ubuntu`, so one name proves nothing)."""
        stated = max((c.nnodes for c in self.log.comms if c.nnodes is not None), default=None)
        if stated is not None:
            return stated
        return len(self.log.hosts) if len(self.log.hosts) > 1 else None

    def transports(self) -> dict[str, int]:
        """Channels per transport path over all pairs, e.g. {"P2P/CUMEM": 96, "NET/IB": 16}."""
        totals: dict[str, int] = {}
        for pair in self.pairs:
            for path, count in pair.channels_by_path.items():
                totals[path] = totals.get(path, 0) + count
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def mnnvl(self) -> MnnvlSummary:
        """NVLink between hosts: NCCL's MNNVL flag, the clique, pairs over P2P/MNNVL or the network, NVLS."""
        return mnnvl_summary(self.log, self.pairs)

    def tuning(self) -> list[SizeChoice]:
        """NCCL's algorithm, protocol and channels per op and size (NCCL_DEBUG_SUBSYS=TUNING lines)."""
        return choices_by_size(self.log.tuning)

    def to_dict(self) -> dict[str, Any]:
        """A stable JSON object."""
        log = self.log
        return {
            "source": self.source, "library": log.library, "nccl_version": log.version,
            "cuda_version": log.cuda_version, "lines_total": log.lines_total, "nccl_lines": log.nccl_lines,
            "nranks": self.nranks, "nnodes": self.nnodes, "hosts": self.hosts, "worst": self.worst,
            "expectations": asdict(self.expectations),
            "transports": self.transports(), "pairs": [p.to_dict() for p in self.pairs],
            "findings": [f.to_dict() for f in self.findings], "mnnvl": self.mnnvl().to_dict(),
            "networks": sorted({name for _, name in log.networks}),
            "ofi_providers": sorted({name for _, name in log.ofi_providers}),
            "net_errors": [{"line": line, "status": status, "message": text} for line, status, text in log.net_errors],
            "net_devices": [asdict(d) for d in log.net_devices],
            "rings": [{"line": line, "pxn": pxn, "gdr": gdr} for line, pxn, gdr in log.rings],
            "channel_counts": [{"line": line, **counts} for line, counts in log.channel_counts],
            "nvls_available": [{"line": line, "available": ok} for line, ok in log.nvls_support],
            "env": [{"line": line, "name": name, "value": value} for line, name, value in log.env],
            "comms": [asdict(c) for c in log.comms],
            "collnet": [asdict(c) for c in log.collnet],
            "graph_bw_gb_per_s": [{"line": line, "max": mx, "total": tot} for line, mx, tot in log.graph_bw_gb_per_s],
            "tuning": [asdict(c) for c in self.tuning()],
            "problems": [p.to_dict() for p in log.problems],
        }


def analyse_nccl_log(text: str, expect: Expectations | None = None, source: str = "<log>") -> NcclLogReport:
    """Parse NCCL INFO output and judge its transports against what the machine should give (`expect`)."""
    expect = expect or Expectations()
    log = parse_log(text)
    pairs = summarise_pairs(log)
    return NcclLogReport(source=source, log=log, pairs=pairs, findings=find_fallbacks(log, pairs, expect),
                         expectations=expect)


MAX_LOG_BYTES = 512 * 2**20
"""An NCCL_DEBUG=INFO log of a very large job runs to tens of MiB; past this it is not a log."""


def read_nccl_log(path: Path | str, expect: Expectations | None = None) -> NcclLogReport:
    """`analyse_nccl_log` on a file; an unreadable file is a UserError naming it."""
    path = Path(path)
    text = read_input_bytes(path, "an NCCL log", MAX_LOG_BYTES).decode("utf-8", errors="replace")
    report = analyse_nccl_log(text, expect, source=str(path))
    if report.log.nccl_lines == 0:
        # Otherwise a wrong file (or a run without NCCL_DEBUG=INFO) would pass --fail-on-fallback as "no fallback".
        raise UserError(f"{path}: no NCCL INFO lines found (was the run made with NCCL_DEBUG=INFO?)")
    unknown = [p for p in report.log.problems if p.message.startswith("TUNING line of an unknown format")]
    if unknown:
        # A choice read wrongly would be reported as NCCL's: refuse rather than guess.
        raise UserError(f"{path}:{unknown[0].line}: TUNING line of an unknown format: '{unknown[0].text[:120]}'")
    return report
