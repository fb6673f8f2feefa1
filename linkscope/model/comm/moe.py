"""MoE dispatch and combine: the two all-to-alls of every expert-parallel layer, timed on a System's tiers.

Each of `ep` ranks holds `tokens_per_rank` tokens, each routed to `topk` of `experts` experts sharded evenly over
the ranks. Kernels (by name, hardware/data/moe_transports.yaml) follow one of three cost models:

- `normal` (deepep-normal, uccl-ep-normal; high throughput): a token travels once to each distinct destination
  node over RDMA, then once to each distinct destination rank over NVLink; the two stages pipeline, so the slower
  one sets the time. FP8 dispatch carries its scales; combine is always BF16.
- `low-latency` (deepep-ll, uccl-ep-ll, pplx; decode): one message per (token, expert) straight to the expert's
  rank, RDMA across nodes and NVLink inside one, plus what the transport charges per remote peer and per remote
  message (a host proxy's queue pairs, doorbells, completions and ordering; nothing for GPU-initiated IBGDA).
- `nccl`: an all-to-allv through NCCL, one copy per (token, expert) as Megatron's alltoall dispatcher permutes them.

The transport (ibgda, proxy, efa, nvlink) is part of the question: `auto` follows the System (one node: nvlink;
EFA: efa; InfiniBand/RoCE with GPUDirect RDMA: ibgda, unless the System names a proxy transport or the kernel
has none; otherwise proxy), and a kernel on a transport it cannot run on is refused with the reason.

Destinations are counted as expectations under uniform routing: a token routed to two experts of one rank travels
once (normal kernel). Node-limited routing (`max_nodes_per_token`, DeepSeek-V3's top-4 groups) confines a token to
that many nodes. `imbalance` (hottest rank over mean) scales the bytes of the rank that finishes last.

Bandwidth follows DeepEP's published convention: inside the NVLink domain, bytes of token copies a rank receives
over the time; across nodes, bytes counted once per destination node (the sender's own included) over the time.
"""

from __future__ import annotations

import functools
import math
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.limits import check_imbalance
from linkscope.hardware.loader import parse_yaml
from linkscope.hardware.moe_transports import AUTO, TRANSPORTS, KernelStyle, moe_transport_facts
from linkscope.hardware.system import RDMA_FABRICS
from linkscope.model.comm.collectives import collective_time
from linkscope.model.comm.tiers import CommTiers, check_multi_node
from linkscope.model.in_force import InForce
from linkscope.model.ranges.accuracy import time_range

KERNELS: tuple[KernelStyle, ...] = ("normal", "low-latency", "nccl")
"""The cost models (moe.yaml's tables are keyed by them); kernel names map onto them (kernel_style)."""
TRANSPORT_CHOICES = (AUTO, *TRANSPORTS)
PROXY_WORDS = frozenset({"proxy", "ibrc"})
"""A System's `scale_out.transport` that says its RDMA goes through a host proxy (no IBGDA)."""
MOE_PRECISIONS = ("fp8", "bf16")
MOE_FILE = Path(__file__).parents[1] / "data" / "moe.yaml"
BF16_BYTES = 2
MAX_TOKENS_PER_RANK = 10_000_000
MAX_EXPERTS = 100_000
MAX_HIDDEN = 10_000_000
RANGE_KIND = "moe"


class MoeConstants(BaseModel):
    """The model's constants (data/moe.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: str
    as_of: date
    fp8_scale_block: int = Field(ge=1)
    fp8_scale_bytes: int = Field(ge=0)
    meta_bytes_per_topk: int = Field(ge=0)
    latency_us: dict[str, float]
    sm_budget_share: dict[str, float]
    moe_layer_overhead_us: float = Field(default=0.0, ge=0)
    """Fixed time of one MoE layer's forward pass beyond its GPU work, microseconds (backward: twice): dropless
    routing's run-time token counts keep the layer out of CUDA graphs, and the dispatcher's device-to-host copy of
    them stops the CPU from running ahead, so the GPU waits while the CPU issues the router, permutation,
    dispatch, expert and combine kernels one by one."""


def moe_constants() -> MoeConstants:
    """The MoE constants in force: the packaged ones, or those of an enclosing `moe_constants_override`."""
    return _IN_FORCE.get()


def moe_constants_override(constants: MoeConstants) -> AbstractContextManager[None]:
    """Predict with `constants` instead of the packaged ones (fitting moe_layer_overhead_us tries candidates)."""
    return _IN_FORCE.override(constants)


@functools.cache
def packaged_moe_constants() -> MoeConstants:
    """data/moe.yaml, validated once."""
    try:
        constants = MoeConstants.model_validate(parse_yaml(MOE_FILE.read_text(encoding="utf-8")))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(MOE_FILE), err["msg"], field=".".join(map(str, err["loc"]))) from None
    for table in (constants.latency_us, constants.sm_budget_share):
        if set(table) != set(KERNELS):
            raise DataError(str(MOE_FILE), f"needs exactly the kernels {', '.join(KERNELS)}")
    return constants


_IN_FORCE = InForce(packaged_moe_constants)


@dataclass(frozen=True)
class MoeRequest:
    """One MoE layer's all-to-all: who sends what to whom."""

    ep: int
    tokens_per_rank: int
    hidden: int
    topk: int
    experts: int
    precision: str = "fp8"
    kernel: str = "normal"
    max_nodes_per_token: int | None = None
    imbalance: float = 1.0
    one_copy_per_rank: bool = False
    """`nccl` kernel: a token travels once per distinct destination rank (a deduplicating all-to-allv, as
    `bench moe` moves it) instead of once per expert."""
    transport: str = AUTO
    """ibgda, proxy, efa, nvlink, or auto (what the System and the kernel give)."""


@dataclass(frozen=True)
class MoePrediction:
    """What `linkscope predict moe --json` prints."""

    ep: int
    nodes: int
    kernel: str
    """The kernel's name (an alias given resolves to it)."""
    transport: str
    transport_reason: str
    """Why this transport: asked for, or what `auto` read from the System and the kernel."""
    dispatch_us: float
    combine_us: float
    dispatch_gb_per_s: float
    combine_gb_per_s: float
    bytes_per_rank: float
    """Dispatch bytes a rank sends as the convention counts them (token copies per destination rank or node)."""
    combine_bytes_per_rank: float
    ranks_per_token: float
    nodes_per_token: float
    bottleneck: str
    dispatch_us_range: tuple[float, float]
    combine_us_range: tuple[float, float]
    peer_us: float = 0.0
    """Of each of dispatch and combine: the transport's per-peer and per-message time (remote peers x per_peer_us
    + remote messages x per_message_us)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def check_request(req: MoeRequest) -> None:
    """Reject what cannot be routed, naming the flag."""
    for value, flag, top in ((req.ep, "--ep", MAX_EXPERTS), (req.tokens_per_rank, "--tokens-per-rank",
                                                            MAX_TOKENS_PER_RANK),
                             (req.hidden, "--hidden", MAX_HIDDEN), (req.topk, "--topk", MAX_EXPERTS),
                             (req.experts, "--experts", MAX_EXPERTS)):
        if value < 1 or value > top:
            raise UserError(f"{flag} must be between 1 and {top} (got {value})")
    if req.topk > req.experts:
        raise UserError(f"--topk {req.topk} is larger than --experts {req.experts}")
    if req.experts % req.ep:
        raise UserError(f"--ep {req.ep} does not divide the {req.experts} experts")
    if req.precision not in MOE_PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(MOE_PRECISIONS)} (got '{req.precision}')")
    try:
        moe_transport_facts().kernel_name(req.kernel)
    except UserError as exc:
        raise UserError(f"--kernel {exc.message}") from None
    if req.transport not in TRANSPORT_CHOICES:
        raise UserError(f"--transport must be one of {', '.join(TRANSPORT_CHOICES)} (got '{req.transport}')")
    if req.max_nodes_per_token is not None and req.max_nodes_per_token < 1:
        raise UserError(f"--max-nodes-per-token must be at least 1 (got {req.max_nodes_per_token})")
    check_imbalance(req.imbalance, "--imbalance")


def _p_hit(experts: int, held: int, topk: int) -> float:
    """Chance that a token's topk experts (drawn without replacement from `experts`) include one of `held`."""
    if held >= experts:
        return 1.0
    miss = 1.0
    for i in range(topk):
        miss *= (experts - held - i) / (experts - i)
        if miss <= 0:
            return 1.0
    return 1.0 - miss


def destinations(req: MoeRequest, gpus_per_node: int) -> tuple[float, float, int, int]:
    """(distinct ranks per token, distinct nodes per token, ranks per node, nodes) under uniform routing."""
    ppn = min(req.ep, gpus_per_node)
    nodes = math.ceil(req.ep / ppn)
    per_rank = req.experts // req.ep
    limit = min(req.max_nodes_per_token or nodes, nodes)
    # A node-limited token picks its experts among `limit` nodes' experts only.
    reach_experts = per_rank * ppn * limit
    topk = min(req.topk, reach_experts)
    ranks = ppn * limit * _p_hit(reach_experts, per_rank, topk)
    node_hits = limit * _p_hit(reach_experts, per_rank * ppn, topk)
    return ranks, node_hits, ppn, nodes


def token_bytes(hidden: int, topk: int, precision: str) -> tuple[float, float]:
    """(dispatch, combine) bytes of one token copy: FP8 with its scales or BF16 out, BF16 back."""
    c = moe_constants()
    meta = c.meta_bytes_per_topk * topk
    if precision == "fp8":
        dispatch = hidden + math.ceil(hidden / c.fp8_scale_block) * c.fp8_scale_bytes + meta
    else:
        dispatch = hidden * BF16_BYTES + meta
    return float(dispatch), float(hidden * BF16_BYTES)


def convention_bytes(tokens: float, copy_bytes: float, ranks_per_token: float, nodes_per_token: float,
                     nodes: int) -> float:
    """DeepEP's bytes of one rank's dispatch or combine: inside one NVLink domain (one node), every token copy a
    destination rank receives, one per distinct destination rank; across nodes, one per distinct destination
    node, the sender's own included."""
    return tokens * (ranks_per_token if nodes == 1 else nodes_per_token) * copy_bytes


def convention_gb_per_s(counted_bytes: float, time_us: float) -> float:
    """Bandwidth in DeepEP's convention: the bytes `convention_bytes` counts over the time (GB/s, 10^9 B/s)."""
    return counted_bytes / (1000.0 * time_us)


def kernel_style(kernel: str) -> KernelStyle:
    """The cost model (`normal`, `low-latency`, `nccl`) of a kernel called by its name or an alias."""
    return moe_transport_facts().kernel(kernel).style


def resolve_transport(tiers: CommTiers, kernel: str, requested: str, nodes: int) -> tuple[str, str]:
    """(transport, why) for `kernel` over `nodes` nodes of the System behind `tiers`: the one asked for, checked
    against the System and the kernel, or what `auto` reads from them. What cannot run is a UserError naming why."""
    facts = moe_transport_facts()
    name = facts.kernel_name(kernel)
    k = facts.kernels[name]
    fabric = tiers.fabric
    if requested == AUTO:
        if nodes == 1:
            transport, why = "nvlink", f"auto: the EP ranks fit one {tiers.node_word}"
        elif fabric == "efa":
            transport, why = "efa", "auto: the System's fabric is EFA"
        elif fabric in RDMA_FABRICS and tiers.gdr and tiers.net_transport not in PROXY_WORDS \
                and "ibgda" in k.transports:
            transport, why = "ibgda", f"auto: {fabric} with GPUDirect RDMA"
        elif fabric in RDMA_FABRICS and tiers.gdr and tiers.net_transport not in PROXY_WORDS:
            transport, why = "proxy", f"auto: {fabric}, and {name} issues its RDMA from a host proxy"
        else:
            transport, why = "proxy", (f"auto: the System names its transport {tiers.net_transport}"
                                       if tiers.net_transport in PROXY_WORDS else
                                       f"auto: {fabric} without GPU-initiated RDMA")
    else:
        transport, why = requested, "asked for"
    t = facts.transports[transport]
    if t.max_nodes is not None and nodes > t.max_nodes:
        raise UserError(f"--transport {transport} stays inside one {tiers.node_word}, but --ep spans {nodes} "
                        f"{tiers.node_word}s of {tiers.system_id}")
    if transport != "nvlink" and fabric not in t.fabrics:
        raise UserError(f"--transport {transport} runs over {' or '.join(t.fabrics)}; {tiers.system_id}'s "
                        f"fabric is {fabric}")
    if transport != "nvlink" and t.needs_gpudirect and not tiers.gdr:
        raise UserError(f"--transport {transport} needs GPUDirect RDMA, which {tiers.system_id} does not have")
    if transport not in k.transports:
        reason = k.refused.get(transport) or f"it runs on {', '.join(k.transports)}"
        raise UserError(f"--kernel {name} cannot run on --transport {transport}: {reason}")
    if nodes > 1 and k.needs_rdma and not (fabric in RDMA_FABRICS and tiers.gdr):
        missing = f"{fabric} without GPUDirect RDMA" if fabric in RDMA_FABRICS else fabric
        raise UserError(f"--kernel {name} needs GPUDirect RDMA across nodes; {tiers.system_id} has {missing}")
    return transport, why


def runnable_kernel(tiers: CommTiers, kernel: str, transport: str, nodes: int) -> str:
    """The kernel a training or serving job runs for `kernel` on this System: itself where it can run over
    `transport`, else its drop-in fallback (DeepEP -> UCCL-EP on EFA), else NCCL's all-to-all; where none can, the
    kernel's own refusal."""
    facts = moe_transport_facts()
    first = facts.kernel_name(kernel)
    chain = [first, facts.kernels[first].fallback, "nccl"]
    for name in dict.fromkeys(c for c in chain if c is not None):
        try:
            resolve_transport(tiers, name, transport, nodes)
        except UserError:
            continue
        return name
    resolve_transport(tiers, first, transport, nodes)
    return first


def transport_problem(tiers: CommTiers, kernel: str, transport: str, nodes: int) -> str | None:
    """Why no kernel of `kernel`'s family (runnable_kernel) can run over `transport` on `nodes` nodes of the
    System, or None where one can."""
    try:
        runnable_kernel(tiers, kernel, transport, nodes)
    except UserError as exc:
        return exc.message
    return None


def moe_path(tiers: CommTiers, kernel: str, transport: str, nodes: int) -> tuple[str, str, str]:
    """(kernel, transport, why) a training or serving job's dispatch and combine run on: runnable_kernel and the
    transport it resolves to, for the output to state."""
    runs = runnable_kernel(tiers, kernel, transport, nodes)
    resolved, why = resolve_transport(tiers, runs, transport, nodes)
    return runs, resolved, why


def _rdma_gb_per_s(tiers: CommTiers, ppn: int) -> float:
    return float(tiers.inter_bw(ppn)) / ppn


def _one_way(tiers: CommTiers, req: MoeRequest, copy_bytes: float, fixed_us: float,
             per_node: int, transport: str) -> tuple[float, float, float, str, float]:
    """(time_us, convention bytes per rank, convention GB/s, bottleneck, per-peer time) of one dispatch or
    combine."""
    ranks, node_hits, ppn, nodes = destinations(req, per_node)
    style = kernel_style(req.kernel)
    t_facts = moe_transport_facts().transports[transport]
    share = moe_constants().sm_budget_share[style]
    rdma_share = share * t_facts.rdma_share
    nvl_gb_per_s = float(tiers.intra_bw(ppn)) * share
    hot = req.imbalance
    t = req.tokens_per_rank
    if style == "normal":
        received = convention_bytes(t, copy_bytes, ranks, node_hits, 1)
        nvl_us = received * hot * (ppn - 1) / ppn / (1000.0 * nvl_gb_per_s) if ppn > 1 else 0.0
        if nodes == 1:
            return (nvl_us + fixed_us, received, convention_gb_per_s(received, nvl_us + fixed_us), tiers.intra_hw,
                    0.0)
        counted = convention_bytes(t, copy_bytes, ranks, node_hits, nodes)
        remote = counted * (nodes - 1) / nodes
        rdma_us = remote * hot / (1000.0 * _rdma_gb_per_s(tiers, ppn) * rdma_share)
        time_us = max(nvl_us, rdma_us) + fixed_us
        return (time_us, counted, convention_gb_per_s(counted, time_us),
                "rdma" if rdma_us >= nvl_us else tiers.intra_hw, 0.0)
    per_token = ranks if style == "nccl" and req.one_copy_per_rank else req.topk
    sent = t * per_token * copy_bytes
    if style == "low-latency":
        local = sent * (ppn - 1) / req.ep * hot
        remote = sent * (req.ep - ppn) / req.ep * hot
        nvl_us = local / (1000.0 * nvl_gb_per_s) if ppn > 1 else 0.0
        rdma_us = remote / (1000.0 * _rdma_gb_per_s(tiers, ppn) * rdma_share) if nodes > 1 else 0.0
        # A host proxy serves the remote peers' queue pairs one after another (doorbell, completions, the
        # ordering EFA lacks); GPU-initiated puts post to every peer's QP at once and charge nothing here.
        remote_messages = t * req.topk * (req.ep - ppn) / req.ep * hot
        peer_us = ((req.ep - ppn) * t_facts.per_peer_us + remote_messages * t_facts.per_message_us
                   if nodes > 1 else 0.0)
        time_us = max(nvl_us, rdma_us) + peer_us + fixed_us
        limit = ("rdma" if rdma_us >= nvl_us else tiers.intra_hw) if max(rdma_us, nvl_us) >= peer_us else \
            f"per-peer ({transport})"
        return time_us, sent, sent / (1000.0 * time_us), limit, peer_us
    result = collective_time("all_to_all", tiers, [sent * hot], req.ep, nodes)
    time_us = float(result.time_us[0]) + fixed_us
    return time_us, sent, sent / (1000.0 * time_us), str(result.bottleneck[0]), 0.0


def predict_moe(tiers: CommTiers, req: MoeRequest, per_node: int | None = None) -> MoePrediction:
    """One dispatch and one combine of `req` on the System behind `tiers`, the EP ranks `per_node` to a node
    (default: as many as a node has), over `req.transport` (resolve_transport)."""
    check_request(req)
    per_node = per_node or tiers.gpus_per_node
    ranks, node_hits, ppn, nodes = destinations(req, per_node)
    check_multi_node(tiers, nodes)
    transport, why = resolve_transport(tiers, req.kernel, req.transport, nodes)
    dispatch_bytes, combine_bytes = token_bytes(req.hidden, req.topk, req.precision)
    fixed_us = moe_constants().latency_us[kernel_style(req.kernel)]
    d_us, d_bytes, d_bw, d_limit, peer_us = _one_way(tiers, req, dispatch_bytes, fixed_us, per_node, transport)
    c_us, c_bytes, c_bw, c_limit, _ = _one_way(tiers, req, combine_bytes, fixed_us, per_node, transport)
    return MoePrediction(ep=req.ep, nodes=nodes, kernel=moe_transport_facts().kernel_name(req.kernel),
                         transport=transport, transport_reason=why, dispatch_us=d_us, combine_us=c_us,
                         dispatch_gb_per_s=d_bw, combine_gb_per_s=c_bw, bytes_per_rank=d_bytes,
                         combine_bytes_per_rank=c_bytes, ranks_per_token=ranks, nodes_per_token=node_hits,
                         bottleneck=d_limit if d_us >= c_us else c_limit,
                         dispatch_us_range=time_range(d_us, RANGE_KIND), combine_us_range=time_range(c_us, RANGE_KIND),
                         peer_us=peer_us)
