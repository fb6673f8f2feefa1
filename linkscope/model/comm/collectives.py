"""Collective time on a System: NCCL's α–β cost model per algorithm and protocol, vectorized with numpy.

`size_bytes` follows nccl-tests' `size` column: the buffer for all-reduce, broadcast, reduce and send/recv;
the whole gathered/scattered buffer for all-gather, reduce-scatter, all-to-all, gather and scatter. Every
function accepts arrays for sizes, ranks and nodes (broadcast together), so a layout search can price
thousands of collectives in one call. `auto` picks the fastest candidate, as NCCL's tuner does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from linkscope.hardware.errors import UserError
from linkscope.model.comm.params import PROTOCOLS, comm_fit, nccl_tuning
from linkscope.model.comm.tiers import CommTiers

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "sendrecv", "gather",
       "scatter")
ALGOS = ("auto", "ring", "tree", "nvls", "nvls_tree", "collnet", "hierarchical", "direct")
_ALGOS_FOR_OP = {
    "all_reduce": ("ring", "tree", "nvls", "nvls_tree", "collnet", "hierarchical"),
    "all_gather": ("ring", "nvls"), "reduce_scatter": ("ring", "nvls"),
    "broadcast": ("ring",), "reduce": ("ring",), "all_to_all": ("direct",), "sendrecv": ("direct",),
    "gather": ("direct",), "scatter": ("direct",),
}
INF = np.inf


@dataclass
class Candidate:
    """One algorithm's best protocol: time, protocol name, and what limits it, per element."""

    algorithm: str
    time_us: np.ndarray
    protocol: np.ndarray
    bottleneck: np.ndarray


@dataclass
class _Shape:
    size: np.ndarray
    n: np.ndarray
    nn: np.ndarray
    ppn: np.ndarray
    labels: bool = True
    """Also work out protocol and bottleneck names (a layout search needs only times, and strings are slow)."""


def _shape(size_bytes: object, ranks: object, nodes: object, labels: bool = True) -> _Shape:
    size, n, nn = np.broadcast_arrays(np.atleast_1d(np.asarray(size_bytes, dtype=float)),
                                      np.asarray(ranks, dtype=float), np.asarray(nodes, dtype=float))
    return _Shape(size=size, n=n, nn=nn, ppn=n / nn, labels=labels)


def _label(s: _Shape, condition: np.ndarray, yes: str | np.ndarray, no: str | np.ndarray) -> np.ndarray:
    """np.where on names, skipped (an empty array) when the caller wants times only."""
    return np.where(condition, yes, no) if s.labels else np.empty(0)


def _best(algorithm: str, times: list[np.ndarray], bottlenecks: list[np.ndarray], protos: tuple[str, ...]) -> Candidate:
    if not bottlenecks[0].size and times[0].size:
        return Candidate(algorithm, np.minimum.reduce(times), np.empty(0), np.empty(0))
    stack = np.stack(times)
    idx = np.argmin(stack, axis=0)
    time = np.take_along_axis(stack, idx[None], axis=0)[0]
    return Candidate(algorithm, time, np.asarray(protos)[idx],
                     np.take_along_axis(np.stack(bottlenecks), idx[None], axis=0)[0])


def _tier_bw(t: CommTiers, s: _Shape) -> tuple[np.ndarray, np.ndarray]:
    """Ring bus bandwidth (min of the intra-node chain and the NICs) and which tier limits it."""
    intra = np.where(s.ppn > 1, t.intra_bw(s.ppn), INF)
    inter = np.where(s.nn > 1, t.inter_bw(s.ppn), INF)
    if not s.labels:
        return np.minimum(intra, inter), np.empty(0)
    intra_name: str | np.ndarray = "nvlink" if t.intra_hw == "nvlink" else "pcie"
    if t.intra_hw == "pci":
        socket_bound = (s.ppn > t.gpus_per_node / t.cpu_sockets) & (t.inter_socket_bw_gb_per_s < t.pcie_bw_gb_per_s)
        intra_name = np.where(socket_bound, "inter-socket", "pcie")
    name = np.where(inter < intra, f"network ({t.fabric})", intra_name)
    return np.minimum(intra, inter), name


def _ll128_allowed(t: CommTiers, s: _Shape) -> np.ndarray:
    # NCCL enables LL128 only on NVLink paths, and across nodes only with the NIC next to the GPU (GDR).
    return (t.intra_hw == "nvlink") & ((s.nn <= 1) | t.gdr)


def _overheads(t: CommTiers, proto: int) -> float:
    return t.net_overhead_us() * (3.0 if proto == 2 else 1.0)


def _net_extra_us(t: CommTiers, proto: int) -> float:
    """The fabric's software path per NET hop; twice for Simple where the receiver flushes (FabricTraits)."""
    return t.net_latency_us_extra * (2.0 if proto == 2 and t.net_simple_flush else 1.0)


def _allowed(t: CommTiers, s: _Shape, proto: int) -> np.ndarray:
    """Whether NCCL may use the protocol (NCCL_PROTO), across nodes only where the fabric's setup runs it."""
    name = PROTOCOLS[proto]
    return np.asarray(name in t.protocols) & ((s.nn <= 1) | (name in t.net_protocols))


def _channel_units(s: _Shape, proto: int, ring_ll: bool, halve_threads: bool = True) -> np.ndarray:
    """How many full channels' worth of threads NCCL launches for a collective of this size.

    NCCL (src/enqueue.cc, topoGetAlgoInfo) drops channels while nBytes < channels * threads * threshold,
    then, down to one channel, halves the threads while that still holds and the thread count is a
    multiple of 128 (512 -> 64 at most, 640 -> 320), keeping at least 3 warps. The ring's LL threshold is
    scaled by the rank count (src/graph/tuning.cc); tree kernels always use every thread.
    """
    tune = nccl_tuning()
    nt_max = tune.max_threads[proto]
    units = s.size / (nt_max * tune.thread_threshold[proto] * (s.n if ring_ll else 1.0))
    channels = np.minimum(np.floor(units), tune.coll_channels)
    if not halve_threads:
        return np.maximum(channels, 1.0)
    halvings_max = 3 if nt_max % 512 == 0 else 1
    with np.errstate(divide="ignore"):
        halvings = np.clip(np.ceil(-np.log2(units)), 0, halvings_max)
    threads = np.maximum(np.exp2(-halvings), 96.0 / nt_max)
    return np.where(units >= 1.0, channels, threads)


def _per_channel_bw(per_channel_ll128: np.ndarray | float, proto: int, proto_bw: np.ndarray) -> np.ndarray:
    """Bus bandwidth one running channel can carry.

    At most NCCL's per-channel LL128 cap (src/graph/tuning.cc), for LL that cap times LL's payload share over
    LL128's (NCCL's 0.5 and 0.92: 8 of every 16 bytes against 120 of 128); Simple has no per-channel cap in
    NCCL. And at most the links of one searched channel: NCCL duplicates the channels it found on fast
    NVLink (src/graph/search.cc, ncclTopoDupChannels, halving each one's bandwidth), so one channel running
    alone gets twice its even share of the protocol's bandwidth.
    """
    tune = nccl_tuning()
    links = 2.0 * proto_bw / tune.coll_channels
    if proto == 2:
        return links
    return np.minimum(links, np.asarray(per_channel_ll128) * (0.5 / tune.ll128_efficiency if proto == 0 else 1.0))


def _ampere_ring(t: CommTiers) -> tuple[float, float]:
    """(NVLink hop scale, LL share) of a ring between A100s over NVLink (data/comm_fit.yaml); (1, 1) elsewhere.

    A ring step over NVLink3 and the second-generation NVSwitch takes longer than NCCL's per-hop latency, and
    LL moves less than NCCL's LL cap: A100 one-node sweeps (one process per GPU and one thread per node alike)
    run 32 KiB .. 32 MiB all-reduces 1.3-2x slower than NCCL's model allows. H100 boards run them as NCCL plans
    (the p5.48xlarge sweep), and no other generation has mid-size one-node evidence, so both stay A100's.
    """
    if t.intra_hw == "nvlink" and t.arch == "ampere":
        fit = comm_fit()
        return fit.ampere_nvlink_hop_scale, fit.ampere_ll_share
    return 1.0, 1.0


def _threads_at_work(s: _Shape, proto: int) -> np.ndarray:
    """Share of the threads of every channel that store and poll at once in one ring step, on a log scale: 0 for
    a single thread, 1 with every channel's threads.

    NCCL launches the channels and threads `_channel_units` gives, and a thread moves its threshold of bytes per
    step (ring LL: one 8-byte line per rank), so a step of a small message keeps fewer threads at work than
    launched.
    """
    tune = nccl_tuning()
    all_threads = tune.coll_channels * tune.max_threads[proto]
    launched = _channel_units(s, proto, ring_ll=proto == 0) * tune.max_threads[proto]
    per_thread = tune.thread_threshold[proto] * (s.n if proto == 0 else 1.0)
    working = np.clip(np.minimum(launched, s.size / per_thread), 1.0, all_threads)
    return np.log2(working) / np.log2(all_threads)


def _ring_hop_us(t: CommTiers, s: _Shape, proto: int) -> np.ndarray:
    """One ring step's latency inside a node: NCCL's per-hop latency, and between A100s over NVLink up to the
    fitted scale of it (data/comm_fit.yaml) as more threads store and poll at once.

    ABCI's A100 sweep (one process per GPU) runs 4-512 B all-reduces at about NCCL's 0.6 us a hop (17.3-18.3 us
    against NCCL's 15.0), 4-16 KiB at about twice it and from 128 KiB, every channel's threads at work, at about
    3.25 times it: the channels' SMs write their lines and poll their flags through the same NVLink ports and
    NVSwitch, so a hop takes longer the more of them do so at once, each doubling of the threads adding about
    the same time.
    """
    hop = nccl_tuning().hw_latency_us[t.intra_hw]["ring"][proto]
    scale = _ampere_ring(t)[0]
    if scale == 1.0:
        return np.full_like(s.n, hop)
    return hop * (1.0 + (scale - 1.0) * _threads_at_work(s, proto))


def _ring_latency(t: CommTiers, s: _Shape, proto: int, nsteps: np.ndarray, ninter: np.ndarray) -> np.ndarray:
    tune = nccl_tuning()
    overhead = _overheads(t, proto)
    intra = _ring_hop_us(t, s, proto)
    intra = np.where(s.nn > 1, np.maximum(intra, overhead), intra)
    inter = tune.hw_latency_us["net"]["ring"][proto] + overhead * (2 if proto == 2 else 1) + _net_extra_us(t, proto)
    return tune.base_latency_us["ring"][proto] + (nsteps - ninter) * intra + ninter * inter


def _steps(op: str, s: _Shape) -> tuple[np.ndarray, np.ndarray]:
    if op == "all_reduce":
        return 2 * (s.n - 1), 2 * (s.nn - 1)
    if op in ("all_gather", "reduce_scatter"):
        return s.n - 1, s.nn - 1
    return s.n, s.nn - 1


def ring(op: str, t: CommTiers, s: _Shape) -> Candidate:
    """NCCL's ring: LL, LL128 and Simple, with NCCL's protocol caps and latency terms."""
    tune = nccl_tuning()
    bus, limit = _tier_bw(t, s)
    nsteps, ninter = _steps(op, s)
    ratio = s.n / nsteps if op in ("all_reduce", "all_gather", "reduce_scatter") else 1.0
    nccl_ll_cap = np.asarray(tune.ll_max_bw[t.arch])[_node_index(s.nn)]
    ll_cap = nccl_ll_cap * _ampere_ring(t)[1]
    bws = [np.minimum(ll_cap, 0.5 * bus), np.where(_ll128_allowed(t, s), tune.ll128_efficiency * bus, 0.0), bus]
    # The A100's LL share bounds what all channels together move, not each channel: ABCI's A100 sweep runs 32 to
    # 128 KiB (one to four channels) as fast as NCCL's per-channel LL rate allows and only 1-2 MiB (every
    # channel) at the lower aggregate, so a channel's own cap is taken from NCCL's LL bandwidth.
    channel_bws = [np.minimum(nccl_ll_cap, 0.5 * bus), bws[1], bws[2]]
    times, names = [], []
    per_channel = np.asarray(tune.per_channel_max_ring_ll128_bw[t.arch])[_node_index(s.nn)]
    for proto, (bw, channel_bw) in enumerate(zip(bws, channel_bws)):
        bw = np.where(_allowed(t, s, proto), bw, 0.0)
        # Small and mid-size messages run on the channels NCCL launches for them, each at its own cap.
        # Below one channel NCCL halves the threads until each keeps its threshold of bytes (ring LL: 8 bytes
        # per rank, one LL line per ring step), so a step is one round of stores whose time the per-hop latency
        # already holds: the ring's transfer runs at one whole channel's rate, not at a share of it.
        units = _channel_units(s, proto, ring_ll=proto == 0, halve_threads=False)
        bw = np.minimum(bw, units * _per_channel_bw(per_channel, proto, channel_bw))
        lat = _ring_latency(t, s, proto, nsteps, ninter)
        if op == "all_reduce" and proto == 2:
            plateau = (s.nn > 1) & (s.size >= s.n * 64 * 16)
            lat = np.where(plateau, lat * tune.ring_plateau_latency_factor[t.arch], lat)
        transfer = np.where(bw > 0, s.size / (1000.0 * bw * ratio), INF)
        times.append(lat + transfer)
        names.append(_label(s, lat > transfer, "latency", limit))
    return _best("ring", times, names, PROTOCOLS)


def tree(op: str, t: CommTiers, s: _Shape) -> Candidate:
    """NCCL's double binary tree for all-reduce across nodes (intra-node chains, log-depth between nodes)."""
    tune = nccl_tuning()
    intra = np.where(s.ppn > 1, t.intra_bw(s.ppn), INF)
    inter = t.inter_bw(s.ppn) * np.where(s.nn <= 2, 2.0, 1.0)
    base = np.minimum(intra, inter)
    limit = _label(s, inter < intra, f"network ({t.fabric})", "nvlink" if t.intra_hw == "nvlink" else "pcie")
    ll_cap = np.asarray(tune.ll_max_bw[t.arch])[_node_index(s.nn)]
    bws = [np.minimum(base / 3.8, ll_cap), np.where(_ll128_allowed(t, s), base * 120 / 128, 0.0),
           base * tune.tree_efficiency]
    log_size = np.log2(np.maximum(s.size, 64) / 64).astype(int)
    in_table = log_size < 23  # NCCL corrects tree all-reduce below 2^23 x 64 bytes only
    tree_ch_simple = np.asarray(tune.per_channel_max_tree_bw[t.arch])[_node_index(s.nn)]
    tree_ch_ll128 = np.asarray(tune.per_channel_max_tree_ll128_bw[t.arch])[_node_index(s.nn)]
    times, names = [], []
    for proto, bw in enumerate(bws):
        bw = np.where(_allowed(t, s, proto), bw, 0.0)
        correction = np.where(in_table, np.asarray(tune.tree_correction[proto])[np.minimum(log_size, 22)], 1.0)
        cap = _channel_units(s, proto, False, False) * (
            np.minimum(tree_ch_simple, 2.0 * bw / tune.coll_channels) if proto == 2 else
            _per_channel_bw(tree_ch_ll128, proto, bw))
        algbw = np.minimum(bw, cap) * tune.tree_pattern_factor * 0.5 * correction
        overhead = _overheads(t, proto)
        intra_lat = tune.hw_latency_us[t.intra_hw]["tree"][proto]
        inter_lat = tune.hw_latency_us["net"]["tree"][proto] + overhead + _net_extra_us(t, proto)
        lat = tune.base_latency_us["tree"][proto] + 2 * ((s.ppn - 1) * intra_lat + np.log2(s.nn) * inter_lat)
        transfer = np.where(algbw > 0, s.size / (1000.0 * algbw), INF)
        times.append(lat + transfer)
        names.append(_label(s, lat > transfer, "latency", limit))
    valid = (s.nn > 1) & (op == "all_reduce")
    return _mask(_best("tree", times, names, PROTOCOLS), valid)


def _node_index(nodes: np.ndarray) -> np.ndarray:
    """NCCL's [1 node, 2 nodes, 4+ nodes] table column, elementwise."""
    return np.where(nodes <= 1, 0, np.where(nodes <= 2, 1, 2))


def _simple(s: _Shape) -> np.ndarray:
    return np.full(s.n.shape, "Simple") if s.labels else np.empty(0)


def _mask(c: Candidate, valid: np.ndarray | bool) -> Candidate:
    c.time_us = np.where(valid, c.time_us, INF)
    return c


def _nvls_algbw(op: str, t: CommTiers, s: _Shape) -> np.ndarray:
    """Algorithm bandwidth of NVLS inside one node.

    All-reduce: the switch reads every GPU's buffer once and multicasts each reduced shard once, so a GPU's
    link carries S(1 + 1/n) per direction instead of a ring's 2S(n-1)/n: algbw = B n/(n+1). All-gather and
    reduce-scatter still receive (n-1)/n of the data per GPU, as NCCL's model has it, and gain only latency.
    NCCL's NVLS efficiency and its (channels-1)/channels apply to both.
    """
    tune = nccl_tuning()
    channels = tune.nvls_channels.get(t.arch, 16)
    bw = t.nvlink_bw_gb_per_s * tune.nvls_efficiency[t.arch] * (channels - 1) / channels
    if op == "all_reduce":
        return bw * s.ppn / (s.ppn + 1)
    return bw * np.ones_like(s.ppn)


_NVLS_CHUNK_STEPS = ((64, 65536.0), (8, 32768.0), (2, 16384.0))
"""NVLS inside a node: below factor x ops x chunk the chunk drops to the next size (calcCollChunking)."""


def _nvls_chunk_extra_us(t: CommTiers, s: _Shape) -> np.ndarray:
    """Time the chunks beyond a 128 KiB chunking cost, at the fitted per-chunk overhead (data/comm_fit.yaml).

    NCCL cuts an NVLS collective into chunks, smaller for smaller buffers (src/enqueue.cc calcCollChunking,
    unregistered buffers), spread over channels x heads concurrent slots (heads: the node's GPUs); each slot
    handles its chunks one after another. NVLS-tree across nodes chunks by other rules and is left as NCCL
    models it: the only multi-node NVLS-tree mid-size sweeps in the evidence (over InfiniBand and over
    GPUDirect-TCPXO) disagree by a factor of several about what a chunk costs.
    """
    overhead = comm_fit().nvls_chunk_overhead_us
    if overhead == 0.0:
        return np.zeros_like(s.size)
    full = float(nccl_tuning().nvls_chunk_bytes)
    ops = nccl_tuning().nvls_channels.get(t.arch, 16) * s.ppn
    chunk = np.full_like(s.size, full)
    for factor, smaller in _NVLS_CHUNK_STEPS:
        chunk = np.where((s.size < factor * ops * chunk) & (chunk > smaller), smaller, chunk)
    return overhead * s.size / ops * (1.0 / chunk - 1.0 / full)


def nvls(op: str, t: CommTiers, s: _Shape) -> Candidate:
    """NVLink SHARP inside one NVSwitch domain: the switch reduces, so two synchronisations instead of 2(n-1)."""
    algbw = _nvls_algbw(op, t, s)
    # NCCL's 25 us is the latency its tuner plans with; a single-node NVLS all-reduce also waits for every GPU
    # to enter the kernel and for two multicast rounds (reduce, then broadcast) to be acknowledged through the
    # switch before the pipeline runs at its bandwidth (data/comm_fit.yaml, nvls_sync_us). All-gather and
    # reduce-scatter make one such round and no evidence measures them: they keep NCCL's latency.
    sync = comm_fit().nvls_sync_us if op == "all_reduce" else 0.0
    lat = nccl_tuning().hw_latency_us["nvlink"]["nvls"][2] + sync
    transfer = s.size / (1000.0 * algbw) + _nvls_chunk_extra_us(t, s)
    valid = t.nvls & (s.nn <= 1) & (s.n >= 2) & (s.n <= t.domain_size)
    limit = _label(s, lat > transfer, "latency", "nvlink (nvls)")
    return _mask(Candidate("nvls", lat + transfer, _simple(s), limit), valid)


def nvls_tree(op: str, t: CommTiers, s: _Shape) -> Candidate:
    """NVLS inside each node, a tree between nodes (Hopper and newer, all-reduce)."""
    tune = nccl_tuning()
    # Between nodes each node sends and receives the whole (node-reduced) buffer once per tree level pair:
    # on two nodes the two trees split it, so the NICs carry half (NCCL's x2 for <= 2 nodes).
    inter = t.inter_bw(s.ppn) * np.where(s.nn <= 2, 2.0, 1.0) * 0.5
    intra = _nvls_algbw(op, t, s)
    algbw = np.minimum(intra, inter)
    overhead = _overheads(t, 2)
    inter_lat = tune.hw_latency_us["net"]["nvls_tree"][2] + overhead + _net_extra_us(t, 2)
    lat = tune.hw_latency_us["nvlink"]["nvls_tree"][2] + 2 * np.log2(s.nn) * inter_lat
    log_size = np.log2(np.maximum(s.size, 64) / 64).astype(int)
    correction = np.where(log_size < 24, np.asarray(tune.tree_correction[2])[np.minimum(log_size, 23)], 1.0)
    time = lat + s.size / (1000.0 * algbw * correction)
    limit = _label(s, inter < intra, f"network ({t.fabric})", "nvlink (nvls)")
    valid = t.nvls & (s.nn > 1) & (s.ppn >= 2) & (op == "all_reduce")
    return _mask(Candidate("nvls_tree", time, _simple(s), limit), valid)


def collnet(op: str, t: CommTiers, s: _Shape) -> Candidate:
    """IB SHARP (CollNet Direct): reduce-scatter in the node, the switch reduces each shard once between nodes."""
    tune = nccl_tuning()
    intra_bw = np.where(s.ppn > 1, t.intra_bw(s.ppn), INF)
    intra_t = 2 * (s.ppn - 1) / s.ppn * s.size / (1000.0 * intra_bw)
    inter_t = s.size / (1000.0 * 0.9 * t.inter_bw(s.ppn))
    intra_lat = tune.hw_latency_us[t.intra_hw]["collnet_direct"][2]
    lat = 2 * (s.ppn - 1) * intra_lat + tune.hw_latency_us["net"]["collnet_direct"][2] + _net_extra_us(t, 2)
    time = lat + np.maximum(intra_t, inter_t)
    limit = _label(s, inter_t > intra_t, f"network ({t.fabric} SHARP)", "nvlink")
    valid = t.sharp & (s.nn > 1) & (op == "all_reduce")
    return _mask(Candidate("collnet", time, _simple(s), limit), valid)


def hierarchical(op: str, t: CommTiers, s: _Shape) -> Candidate:
    """Reduce-scatter in the node, all-reduce of each shard across nodes, all-gather in the node (ASTRA-sim style)."""
    in_node = _Shape(size=s.size, n=s.ppn, nn=np.ones_like(s.nn), ppn=s.ppn, labels=s.labels)
    across = _Shape(size=s.size / s.ppn, n=s.nn, nn=s.nn, ppn=np.ones_like(s.ppn), labels=s.labels)
    rs, ag = ring("reduce_scatter", t, in_node), ring("all_gather", t, in_node)
    ar = ring("all_reduce", t, across)
    intra_t = np.where(s.ppn > 1, rs.time_us + ag.time_us, 0.0)
    time = intra_t + ar.time_us
    limit = _label(s, ar.time_us > intra_t, ar.bottleneck, rs.bottleneck)
    valid = (s.nn > 1) & (op == "all_reduce")
    return _mask(Candidate("hierarchical", time, _simple(s), limit), valid)


def _p2p_latency(t: CommTiers, multi_node: np.ndarray) -> np.ndarray:
    tune = nccl_tuning()
    intra = tune.base_latency_us["ring"][2] + tune.hw_latency_us[t.intra_hw]["ring"][2]
    inter = intra + tune.hw_latency_us["net"]["ring"][2] + 2 * _overheads(t, 2) + _net_extra_us(t, 2)
    return np.where(multi_node, inter, intra)


def direct(op: str, t: CommTiers, s: _Shape) -> Candidate:
    """Point-to-point patterns: all-to-all, ring send/recv, gather and scatter at the root."""
    nic_per_gpu = t.inter_bw(s.ppn) / np.maximum(s.ppn, 1)
    if op == "sendrecv":
        intra_bytes, inter_bytes = np.where(s.ppn > 1, s.size, 0.0), np.where(s.nn > 1, s.size, 0.0)
        intra_bw = t.intra_bw(np.where(t.scale_up_kind == "pcie", s.ppn, 2))
    else:
        # all_to_all: every rank's share; gather/scatter: the root's link carries everyone's share.
        intra_bytes, inter_bytes = s.size * (s.ppn - 1) / s.n, s.size * (s.n - s.ppn) / s.n
        intra_bw = t.intra_bw(s.ppn)
    intra_t = np.where(intra_bytes > 0, intra_bytes / (1000.0 * intra_bw), 0.0)
    inter_t = np.where(inter_bytes > 0, inter_bytes / (1000.0 * np.where(s.nn > 1, nic_per_gpu, INF)), 0.0)
    lat = _p2p_latency(t, s.nn > 1) + all_to_all_peer_us(op, t, s.n, s.ppn, s.nn)
    time = lat + np.maximum(intra_t, inter_t)
    limit = _label(s, inter_t > intra_t, f"network ({t.fabric})", "nvlink" if t.intra_hw == "nvlink" else "pcie")
    limit = _label(s, lat > np.maximum(intra_t, inter_t), "latency", limit)
    return Candidate("direct", time, _simple(s), limit)


def all_to_all_peer_us(op: str, t: CommTiers, ranks: ArrayLike, ppn: ArrayLike, nodes: ArrayLike) -> np.ndarray:
    """What an all-to-all's remote peers add to its latency: NCCL runs it as a send and a receive to every peer,
    and one proxy thread per rank posts the network ones and polls their completions one peer after another, so
    each remote peer costs a network operation's CPU time (the tuner's per-op `net_overhead_us`, the LL rate:
    the work of one post and its completion). Peers inside the node go over NVLink/PCIe from the GPU's own
    channels and add nothing; other ops add nothing."""
    if op != "all_to_all":
        return np.zeros_like(np.asarray(ranks, dtype=float))
    remote = np.asarray(ranks, dtype=float) - np.asarray(ppn, dtype=float)
    return np.where(np.asarray(nodes) > 1, remote * t.net_overhead_us(), 0.0)


_IMPLS = {"ring": ring, "tree": tree, "nvls": nvls, "nvls_tree": nvls_tree, "collnet": collnet,
          "hierarchical": hierarchical, "direct": direct}


def candidates(op: str, tiers: CommTiers, size_bytes: object, ranks: object, nodes: object,
               algo: str = "auto", labels: bool = True) -> list[Candidate]:
    """Every algorithm that can run `op` (or just `algo`), each at its best protocol."""
    if op not in OPS:
        raise UserError(f"unknown op '{op}' (choose from {', '.join(OPS)})")
    if algo not in ALGOS:
        raise UserError(f"unknown algorithm '{algo}' (choose from {', '.join(ALGOS)})")
    allowed = _ALGOS_FOR_OP[op]
    if algo != "auto" and algo not in allowed:
        raise UserError(f"algorithm '{algo}' does not implement {op} (it has: {', '.join(allowed)})")
    s = _shape(size_bytes, ranks, nodes, labels)
    # `auto` mirrors NCCL's tuner, which never picks the textbook hierarchical decomposition.
    chosen = [a for a in allowed if a != "hierarchical"] if algo == "auto" else [algo]
    with np.errstate(divide="ignore", invalid="ignore"):
        return [_IMPLS[a](op, tiers, s) for a in chosen]


def collective_time(op: str, tiers: CommTiers, size_bytes: object, ranks: object, nodes: object,
                    algo: str = "auto", labels: bool = True) -> Candidate:
    """The fastest candidate per element (or the one asked for). Single-rank collectives take no time.

    With `labels=False` only `time_us` is filled: the fast path for layout searches.
    """
    cands = candidates(op, tiers, size_bytes, ranks, nodes, algo, labels)
    n = np.asarray(ranks, dtype=float)
    if not labels:
        time = np.minimum.reduce([c.time_us for c in cands])
        return Candidate("", np.where(n <= 1, 0.0, time), np.empty(0), np.empty(0))
    stack = np.stack([c.time_us for c in cands])
    idx = np.argmin(stack, axis=0)

    def pick(attr: str) -> np.ndarray:
        return np.take_along_axis(np.stack([getattr(c, attr) for c in cands]), idx[None], 0)[0]

    time = np.take_along_axis(stack, idx[None], 0)[0]
    names = np.asarray([c.algorithm for c in cands])[idx]
    return Candidate(algorithm=names, time_us=np.where(np.broadcast_to(n, time.shape) <= 1, 0.0, time),
                     protocol=pick("protocol"), bottleneck=pick("bottleneck"))
