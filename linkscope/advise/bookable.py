"""Which node counts an offering can run a job at: whole nodes, and more than one only where clusters can
be booked and the network between nodes is known well enough to predict."""

from __future__ import annotations

import math
from dataclasses import dataclass

from linkscope.advise.inputs import DEFAULT_GPU_RANGE, node_counts_in_range
from linkscope.hardware.offering import Offering
from linkscope.hardware.system import System
from linkscope.model.comm.tiers import CommTiers


@dataclass(frozen=True)
class GpuRequest:
    """An exact GPU count (`--gpus N`), or a range whose power-of-two whole-node counts are all tried."""

    gpus: int | None = None
    low: int = DEFAULT_GPU_RANGE[0]
    high: int = DEFAULT_GPU_RANGE[1]

    def describe(self) -> str:
        """`64 GPUs` or `8..1024 GPUs`."""
        return f"{self.gpus} GPUs" if self.gpus is not None else f"{self.low}..{self.high} GPUs"


def wanted_node_counts(request: GpuRequest, gpus_per_node: int,
                       nodes_per_domain: int = 1) -> tuple[list[int], str | None]:
    """Node counts the request asks for on nodes of `gpus_per_node` GPUs, or why there are none. Where an NVLink
    domain spans `nodes_per_domain` nodes, whole domains (1, 2, 4, 8 of them) are counts too: 18 trays fill an
    NVL72 rack, which no power of two does."""
    if request.gpus is not None:
        if request.gpus % gpus_per_node:
            return [], f"{request.gpus} GPUs do not fill whole nodes of {gpus_per_node} GPUs"
        return [request.gpus // gpus_per_node], None
    counts = node_counts_in_range(request.low, request.high, gpus_per_node)
    if nodes_per_domain > 1:
        domains = node_counts_in_range(request.low, request.high, gpus_per_node * nodes_per_domain)
        counts = sorted(set(counts) | {d * nodes_per_domain for d in domains})
    if not counts:
        return [], f"no power-of-two count of {gpus_per_node}-GPU nodes lies in {request.low}..{request.high} GPUs"
    return counts, None


def multi_node_block(offering: Offering, tiers: CommTiers, nodes: int, system: System | None = None) -> str | None:
    """Why `nodes` nodes of this offering (as `system` books them; the offering's own by default) cannot be booked
    or predicted; None when they can. The NICs matter only beyond one NVLink domain: the trays of one GB200 NVL72
    rack reach each other over NVLink."""
    if nodes <= 1:
        return None
    system = system or offering.system
    if system.node.scale_out.fabric == "none" and not system.domain_spans_nodes:
        return f"single node only: no network between nodes (needs {nodes} nodes)"
    if offering.multi_node is False:
        return f"single node only: multi-node clusters are not bookable (needs {nodes} nodes)"
    if system.max_nodes is not None and nodes > system.max_nodes:
        return f"at most {system.max_nodes} nodes bookable (needs {nodes})"
    try:
        domains = system.with_nodes(nodes).nccl_nodes
    except ValueError as exc:
        return str(exc)
    if domains > 1 and system.node.scale_out.fabric == "none":
        return f"no network between NVLink domains (needs {domains})"
    if domains > 1 and math.isnan(tiers.nic_node_gb_per_s):
        return f"NIC rate unknown, so a job across {domains} {tiers.node_word}s cannot be predicted"
    return None


def bookable_node_counts(offering: Offering, tiers: CommTiers, request: GpuRequest,
                         system: System | None = None) -> tuple[list[int], str | None]:
    """The node counts to evaluate on `system` (the offering's own by default), and the reason when none is left."""
    system = system or offering.system
    wanted, reason = wanted_node_counts(request, system.node.gpus, system.nodes_per_domain)
    if reason:
        return [], reason
    blocks = {n: multi_node_block(offering, tiers, n, system) for n in wanted}
    allowed = [n for n in wanted if blocks[n] is None]
    if allowed:
        return allowed, None
    # Report the smallest count that was asked for: the nearest the offering came.
    return [], blocks[min(wanted)]
