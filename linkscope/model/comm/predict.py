"""One collective on one System, with nccl-tests' algbw/busbw and the reason it takes the time it does."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.ranges.accuracy import spread, time_range
from linkscope.model.comm.collectives import candidates, collective_time
from linkscope.model.comm.issue import issued_time_us
from linkscope.model.comm.tiers import CommTiers, check_multi_node, comm_tiers
from linkscope.results.busbw import algbw_gb_per_s, bus_factors


@dataclass(frozen=True)
class CollectivePrediction:
    """What `linkscope predict collective` reports for one size (JSON keys as nccl-tests names them)."""

    op: str
    bytes: int
    gpus: int
    nodes: int
    algorithm: str
    protocol: str
    time_us: float
    algbw: float
    busbw: float
    bottleneck: str
    time_us_range: tuple[float, float] = (0.0, 0.0)
    """p10..p90 of the time, from the leave-one-source-out errors of collective predictions of its class."""
    range_basis: str = ""
    """What evidence the range comes from (`model.ranges.accuracy.spread`), or that there is none."""
    range_note: str | None = None
    """What a user must know about the range (far from all evidence, widened outside its class)."""
    nvlink_domains: int | None = None
    """NVLink domains the GPUs span where a domain joins several nodes (NCCL's nodes there); None otherwise."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def layout_for(system: System, gpus: int | None) -> System:
    """The System sized to `gpus` GPUs (all of it by default): one node's GPUs at most per node, whole nodes
    beyond, spread evenly over NVLink domains that span nodes."""
    gpus = gpus or system.gpus
    if gpus < 1:
        raise UserError(f"must be at least 1 (got {gpus})", field="gpus")
    try:
        sized = system if gpus == system.gpus else system.with_gpus(gpus)
        sized.domain_split()
    except ValueError as exc:
        raise UserError(str(exc), field="gpus") from None
    if system.max_nodes is not None and sized.nodes > system.max_nodes:
        raise UserError(f"{system.id} can be booked as at most {system.max_nodes} node(s); {gpus} GPUs need "
                        f"{sized.nodes}")
    return sized


def _check_algo(op: str, tiers: CommTiers, size: np.ndarray, ranks: int, nodes: int, algo: str) -> None:
    if algo == "auto":
        return
    cand = candidates(op, tiers, size, ranks, nodes, algo)[0]
    if not np.all(np.isfinite(cand.time_us)):
        raise UserError(f"algorithm '{algo}' cannot run {op} on {tiers.system_id} with {ranks} GPUs on "
                        f"{nodes} node(s) ({_why_not(algo, tiers, nodes)})")


def _why_not(algo: str, tiers: CommTiers, nodes: int) -> str:
    reasons = {
        "nvls": "needs NVSwitch with NVLS (Hopper or newer) and a single node",
        "nvls_tree": "needs NVSwitch with NVLS and several nodes",
        "collnet": "needs InfiniBand with SHARP and several nodes",
        "tree": "NCCL's tree is used for all-reduce across nodes",
        "hierarchical": "needs several nodes",
    }
    return reasons.get(algo, "not available")


def predict_sizes(system: System, op: str, sizes_bytes: list[int], gpus: int | None = None,
                  algo: str = "auto", tiers: CommTiers | None = None,
                  gpus_per_thread: int = 1) -> list[CollectivePrediction]:
    """Predict `op` at each size on `gpus` GPUs of `system` (all of it by default), as nccl-tests measures it
    with one thread driving `gpus_per_thread` GPUs (`-g`; 1: one process per GPU)."""
    sized = layout_for(system, gpus)
    # NCCL's nodes: with an NVLink domain across nodes (MNNVL), each domain's GPUs are one node to it.
    ranks, nodes = sized.gpus, sized.nccl_nodes
    tiers = tiers or comm_tiers(system)
    check_multi_node(tiers, nodes)
    size = np.asarray(sizes_bytes, dtype=float)
    if np.any(size <= 0):
        raise UserError("sizes must be positive")
    _check_algo(op, tiers, size, ranks, nodes, algo)
    result = collective_time(op, tiers, size, ranks, nodes, algo)
    gpu_time_us = result.time_us
    times_us = issued_time_us(gpu_time_us, gpus_per_thread) if ranks > 1 else gpu_time_us
    host = f"host (issuing {gpus_per_thread} GPU{'s' if gpus_per_thread > 1 else ''} from one thread)"
    factor = float(bus_factors(op, ranks))
    out = []
    evidence = spread("collectives", system, nodes, sized.nodes, gpus=ranks)
    for i, nbytes in enumerate(sizes_bytes):
        time_us = float(times_us[i])
        bottleneck = host if time_us > gpu_time_us[i] else str(result.bottleneck[i])
        algbw = algbw_gb_per_s(nbytes, time_us)
        out.append(CollectivePrediction(op=op, bytes=int(nbytes), gpus=ranks, nodes=sized.nodes,
                                        algorithm=str(result.algorithm[i]), protocol=str(result.protocol[i]),
                                        time_us=time_us, algbw=algbw, busbw=algbw * factor,
                                        bottleneck=bottleneck,
                                        time_us_range=time_range(time_us, "collectives", system, nodes, sized.nodes,
                                                                 gpus=ranks),
                                        range_basis=evidence.basis, range_note=evidence.note,
                                        nvlink_domains=nodes if sized.domain_spans_nodes else None))
    return out
