"""The host side of a collective as nccl-tests measures it: each operation also has to be issued.

nccl-tests times `iters` operations issued back to back and reports the mean per operation, so the host that
issues them is part of the figure: while the GPUs finish an operation faster than the host issues the next, the
host sets the pace. One thread driving G GPUs (`-t 1 -g G`) issues G NCCL calls per operation, one per GPU
(ncclGroupStart, G calls, ncclGroupEnd); with one process per GPU each host issues one. An operation therefore
takes at least G times the host time of one call (`nccl_call_host_us` in data/comm_fit.yaml).
"""

from __future__ import annotations

import numpy as np

from linkscope.model.comm.params import comm_fit


def issue_floor_us(gpus_per_thread: int) -> float:
    """Host time to issue one operation on `gpus_per_thread` GPUs from one thread."""
    return gpus_per_thread * comm_fit().nccl_call_host_us


def issued_time_us(time_us: np.ndarray, gpus_per_thread: int) -> np.ndarray:
    """Per-operation time of a back-to-back loop: the GPUs' time, or the host's when that is longer."""
    return np.maximum(time_us, issue_floor_us(gpus_per_thread))
