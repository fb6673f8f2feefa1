"""nccl-tests' bandwidth conventions: op names, algbw from size and time, and the busbw factor per collective.

algbw is the bytes one operation's buffer represents divided by the time. nccl-tests prints `size` as that number
of bytes for every collective except hypercube (size x (n-1)/n) and alltoallv (largest per-rank volume), so
algbw = size / time almost everywhere. busbw rescales algbw by how much of the buffer a ring moves over each
link, so it can be compared with a link's bandwidth (nccl-tests `doc/PERFORMANCE.md`).
"""

from __future__ import annotations

import numpy as np

BINARY_TO_OP: dict[str, str] = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "alltoall_perf": "all_to_all",
    "sendrecv_perf": "sendrecv",
    "gather_perf": "gather",
    "scatter_perf": "scatter",
    "hypercube_perf": "hypercube",
    "alltoallv_perf": "all_to_allv",
}
"""nccl-tests binary name (without an MPI or other name suffix) -> linkscope op name."""

OP_TO_BINARY: dict[str, str] = {op: binary for binary, op in BINARY_TO_OP.items()}

ROOTED_OPS = frozenset({"broadcast", "reduce", "gather", "scatter"})

_RING_OPS = frozenset({"all_gather", "reduce_scatter", "all_to_all", "all_to_allv", "gather", "scatter"})
_UNIT_OPS = frozenset({"broadcast", "reduce", "sendrecv", "hypercube"})


def bus_factors(op: str, ranks: np.ndarray | int) -> np.ndarray:
    """busbw / algbw for `op` on each rank count of `ranks` (an array, for the model's vectorized search).

    Raises ValueError for an op nccl-tests does not define. The one owner of the convention: the bench, the
    importers and the model all take their factor from here.
    """
    n = np.asarray(ranks, dtype=float)
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in _RING_OPS:
        return (n - 1) / n
    if op in _UNIT_OPS:
        return np.ones_like(n)
    raise ValueError(f"no busbw convention for op '{op}'")


def bus_factor(op: str, nranks: int) -> float:
    """busbw / algbw for `op` on `nranks` ranks, as nccl-tests' `*GetBw` functions compute it.

    Zero for one rank except where the factor is 1, which is why a single-GPU all-reduce reports busbw 0.
    Raises ValueError for an op nccl-tests does not define.
    """
    if nranks < 1:
        raise ValueError(f"nranks must be at least 1, got {nranks}")
    return float(bus_factors(op, nranks))


def algbw_gb_per_s(size_bytes: int, time_us: float) -> float:
    """Algorithm bandwidth in GB/s (10^9 bytes/s) for a buffer of `size_bytes` moved in `time_us`."""
    if time_us <= 0:
        return 0.0
    return size_bytes / 1e9 / (time_us * 1e-6)
