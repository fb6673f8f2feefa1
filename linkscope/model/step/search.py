"""Choose a training layout: enumerate TP x PP x DP x CP x interleave x micro-batch x recompute x ZeRO,
price every candidate at once with the vectorized step model, keep the fastest that fits in memory.

Fixed values (what the user gave) narrow the enumeration; `None` means "search it".
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from linkscope.hardware.errors import UserError
from linkscope.hardware.system import System
from linkscope.model.step.layout import RECOMPUTE, Layouts
from linkscope.model.comm.tiers import CommTiers, check_multi_node, comm_tiers
from linkscope.model.step.job import FRAMEWORK_ZERO_STAGES, Job
from linkscope.model.step.peft import data_parallel_only
from linkscope.model.step.train import StepEstimate, estimate_steps

MAX_MICRO_BATCH = 16
MAX_INTERLEAVE = 8


@dataclass(frozen=True)
class LayoutRequest:
    """A partial layout: None for every field the search may choose."""

    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = 1
    interleave: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    zero: int | None = None
    sequence_parallel: bool | None = None
    ep: int | None = None
    """None: searched for an MoE model, 1 for a dense one."""
    etp: int | None = 1


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small: list[int] = []
    large: list[int] = []
    d = 1
    while d * d <= n:  # O(sqrt n): a huge batch or layer count must not hang the search
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def _tp_options(job: Job, gpus: int, per_node: int, req: LayoutRequest) -> list[int]:
    if req.tp is not None:
        return [req.tp]
    if data_parallel_only(job.peft):
        return [1]
    m = job.model
    # Searching TP across nodes (across NVLink domains, where a domain spans nodes) is never worth it; a user
    # may still ask for it explicitly.
    return [t for t in divisors(gpus) if t <= per_node and m.heads % t == 0 and m.kv_heads % t == 0]


def _pp_options(job: Job, rest: int, req: LayoutRequest) -> list[int]:
    if req.pp is not None:
        return [req.pp] if rest % req.pp == 0 else []
    if data_parallel_only(job.peft):
        return [1]
    return [p for p in divisors(rest) if p <= job.model.layers and job.model.layers % p == 0]


def _cp_options(job: Job, rest: int, req: LayoutRequest) -> list[int]:
    if req.cp is not None:
        return [req.cp] if rest % req.cp == 0 else []
    return [c for c in (1, 2, 4, 8, 16) if rest % c == 0 and job.seq_len % (2 * c) == 0 and job.seq_len // c >= 1024]


def _outer(job: Job, gpus: int, per_node: int, req: LayoutRequest) -> list[tuple[int, int, int, int]]:
    """(tp, pp, cp, dp) combinations whose product is the GPU count."""
    combos = []
    for tp in _tp_options(job, gpus, per_node, req):
        if gpus % tp:
            continue
        for pp in _pp_options(job, gpus // tp, req):
            for cp in _cp_options(job, gpus // (tp * pp), req):
                dp = gpus // (tp * pp * cp)
                if req.dp is None or req.dp == dp:
                    combos.append((tp, pp, cp, dp))
    return combos


def _inner(job: Job, pp: int, dp: int, req: LayoutRequest) -> list[tuple[int, int]]:
    """(interleave, micro_batch) pairs valid for one (pp, dp)."""
    if job.global_batch % dp:
        return []
    local = job.global_batch // dp
    mbs = [req.micro_batch] if req.micro_batch else [b for b in divisors(local) if b <= MAX_MICRO_BATCH]
    # Stages of uneven depth (layers not a multiple of pp: the first and last stages hold fewer, as Megatron-Core's
    # pipeline layout and its embedding/loss-in-split options place them) interleave chunks of the full stages.
    layers = -(-job.model.layers // pp)
    if req.interleave:
        vs = [req.interleave]
    else:
        vs = [v for v in divisors(max(layers, 1)) if v <= MAX_INTERLEAVE] if pp > 1 else [1]
    pairs = []
    for v, mb in itertools.product(vs, mbs):
        if local % mb:
            continue
        # Megatron's interleaved schedule needs the micro-batch count to be a multiple of pp.
        if v > 1 and (local // mb) % pp:
            continue
        pairs.append((v, mb))
    return pairs


def _expert_options(job: Job, tp: int, cp: int, dp: int, req: LayoutRequest) -> list[tuple[int, int]]:
    """(ep, etp) pairs that fold into the tp x cp x dp ranks and divide the experts."""
    m = job.model
    if not m.is_moe:
        return [(1, 1)]
    folded = tp * cp * dp
    etps = [req.etp] if req.etp is not None else [e for e in divisors(folded) if e <= tp]
    pairs = []
    for etp in etps:
        if folded % etp or m.moe_ffn_hidden % etp:
            continue
        eps = [req.ep] if req.ep is not None else divisors(folded // etp)
        pairs += [(ep, etp) for ep in eps if (folded // etp) % ep == 0 and m.experts % ep == 0]
    return pairs


def enumerate_layouts(job: Job, system: System, req: LayoutRequest, gpus: int | None = None) -> Layouts:
    """Every candidate layout of `gpus` GPUs (default: all of `system`'s) that `req` allows."""
    rows = []
    recomputes = [RECOMPUTE.index(req.recompute)] if req.recompute else [0, 1, 2]
    zeros = [req.zero] if req.zero is not None else list(FRAMEWORK_ZERO_STAGES.get(job.framework, (0, 1, 2, 3)))
    for tp, pp, cp, dp in _outer(job, system.gpus if gpus is None else gpus, system.nccl_node_gpus, req):
        sp = req.sequence_parallel if req.sequence_parallel is not None else tp > 1
        for v, mb in _inner(job, pp, dp, req):
            for rec, zero, (ep, etp) in itertools.product(recomputes, zeros, _expert_options(job, tp, cp, dp, req)):
                if zero == 3 and pp > 1 and req.zero is None:
                    continue
                if zero >= 2 and pp > 1 and job.framework == "deepspeed":
                    continue  # DeepSpeed's pipeline engine runs ZeRO 0-1 only
                if zero > 0 and dp == 1 and req.zero is None:
                    continue
                rows.append((tp, pp, dp, cp, v, mb, rec, zero, sp, ep, etp))
    if not rows:
        return Layouts(*(np.zeros(0, dtype=int) for _ in range(11)))
    cols = np.asarray(rows, dtype=np.int64).T
    return Layouts(tp=cols[0], pp=cols[1], dp=cols[2], cp=cols[3], v=cols[4], mb=cols[5], recompute=cols[6],
                   zero=cols[7], sp=cols[8].astype(bool), ep=cols[9], etp=cols[10])


def usable_layouts(job: Job, system: System, req: LayoutRequest) -> tuple[Layouts, int]:
    """(candidate layouts, GPUs they use): all of `system`'s GPUs where some layout divides them, else the most
    GPUs per node (per NVLink domain, in whole trays, where the domain spans nodes) that one does. A 72-GPU NVL72
    rack has the factor 9, which no power-of-two batch, head or layer count divides, so jobs there run on 16 of
    its 18 trays (64 GPUs) and leave the rest idle (still paid for)."""
    layouts = enumerate_layouts(job, system, req)
    fixed_all = None not in (req.tp, req.pp, req.dp, req.cp)
    nodes, per_node = system.domain_split()
    step = system.node.gpus if system.domain_spans_nodes else 1
    while len(layouts) == 0 and not fixed_all and per_node > step:
        per_node -= step
        layouts = enumerate_layouts(job, system, req, gpus=per_node * nodes)
    return layouts, (per_node * nodes if len(layouts) else system.gpus)


@dataclass
class SearchResult:
    """The chosen layout (index `best` into `layouts`) and every candidate's estimate."""

    layouts: Layouts
    estimate: StepEstimate
    best: int
    evaluated: int
    any_fits: bool
    gpus: int = 0
    """GPUs the layouts use (fewer than the System's where no layout divides its nodes; 0: all of them)."""
    least_memory_index: int = -1
    """Index of the layout that needs the least memory (-1: not searched)."""


def search(job: Job, system: System, req: LayoutRequest, tiers: CommTiers | None = None) -> SearchResult:
    """Fastest layout that fits in memory; if none fits, the one that needs the least among the values given (a
    value the user gave is never traded for memory): the caller says that it does not fit (`any_fits`)."""
    layouts, gpus = usable_layouts(job, system, req)
    if len(layouts) == 0:
        raise UserError(f"no valid layout of {system.gpus} GPUs for {job.model.id} with global batch "
                        f"{job.global_batch} and the values given (check that they divide evenly)")
    tiers = tiers or comm_tiers(system)
    check_multi_node(tiers, system.nccl_nodes)
    est = estimate_steps(job, system, layouts, tiers)
    any_fits = bool(np.any(est.fits))
    least_memory_index = int(np.argmin(est.memory_gib_per_gpu))
    # The fastest of those that do not fit can need many times the memory (a 70B model at dp 8 on 8 GPUs):
    # the one closest to fitting is the answer a user can act on.
    best = int(np.argmin(np.where(est.fits, est.step_time_s, np.inf))) if any_fits else least_memory_index
    return SearchResult(layouts=layouts, estimate=est, best=best, evaluated=len(layouts), any_fits=any_fits,
                        gpus=gpus, least_memory_index=least_memory_index)
