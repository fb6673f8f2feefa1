"""What one host thread spends issuing NCCL collectives: the floor of a back-to-back nccl-tests loop, measured.

nccl-tests times `iters` operations issued back to back and divides by their number, so an operation never
takes less than the host time that issues it. With one thread driving G GPUs (`-t 1 -g G`) each operation is a
group of G calls, one per GPU. This script measures, on one CUDA device and through the NCCL library torch
ships, the host time of:
- one ncclAllReduce of 8 bytes on a one-rank communicator, issued alone (ncclAllReduce outside a group);
- a group of 8 such calls on 8 communicators (ncclGroupStart, 8 x ncclAllReduce, ncclGroupEnd), the shape of
  `-t 1 -g 8`;
- one cudaMemsetAsync of 8 bytes, the reference: a stream operation with no NCCL work around it;
- one ncclGetVersion, the cost of a call from Python into the library (what nccl-tests, written in C, does
  not pay).
Each figure is the wall time of a batch of calls issued without waiting, divided by the calls (the device drains
them afterwards). On one rank NCCL takes its one-rank path (a local reduce or copy), so these are lower bounds on
what a multi-rank collective's enqueue costs.

Prints the figures and, with --json FILE, writes them. Needs a CUDA device; refuses in one line without one.

    python benchmarks/gpu_nccl_launch.py [--json out.json]
"""

from __future__ import annotations

import ctypes
import glob
import os
import statistics
import sys
import time
from collections.abc import Callable

from gpu_decode_floor import begin, saved

NCCL_FLOAT32 = 7
NCCL_SUM = 0
GROUP = 8
BATCH = 200
REPEAT = 25


def _library(pattern: str, fallback: str) -> ctypes.CDLL:
    """The shared library torch loads (from its own lib directory or an nvidia-* wheel), else the system's."""
    import torch
    roots = [os.path.dirname(torch.__file__)] + [os.path.join(p, "nvidia") for p in sys.path if os.path.isdir(p)]
    for root in roots:
        found = sorted(glob.glob(os.path.join(root, "**", pattern), recursive=True))
        if found:
            return ctypes.CDLL(found[0])
    return ctypes.CDLL(fallback)


def per_call_us(issue: Callable[[], None], calls: int, sync: Callable[[], None]) -> float:
    """Median over REPEAT batches of the host time to issue `calls` operations, per operation."""
    for _ in range(3):
        issue()
    sync()
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        issue()
        samples.append((time.perf_counter() - start) * 1e6 / calls)
        sync()
    return statistics.median(samples)


def main() -> int:
    started = begin("gpu_nccl_launch", __doc__)
    if started is None:
        return 2
    results, json_path = started
    import torch
    nccl, cudart = _library("libnccl.so*", "libnccl.so.2"), _library("libcudart.so*", "libcudart.so")
    version = ctypes.c_int()
    nccl.ncclGetVersion(ctypes.byref(version))
    comms = [ctypes.c_void_p() for _ in range(GROUP)]
    dev = (ctypes.c_int * 1)(0)
    for comm in comms:
        if nccl.ncclCommInitAll(ctypes.byref(comm), 1, dev) != 0:
            print("gpu_nccl_launch: ncclCommInitAll failed", file=sys.stderr)
            return 3
    send = torch.zeros(2, device="cuda")
    recv = torch.zeros(2, device="cuda")
    stream = torch.cuda.Stream()
    handle = ctypes.c_void_p(stream.cuda_stream)
    sptr, rptr = ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr())

    def allreduce(comm: ctypes.c_void_p) -> None:
        nccl.ncclAllReduce(sptr, rptr, ctypes.c_size_t(2), NCCL_FLOAT32, NCCL_SUM, comm, handle)

    def alone() -> None:
        for _ in range(BATCH):
            allreduce(comms[0])

    def grouped() -> None:
        for _ in range(BATCH // GROUP):
            nccl.ncclGroupStart()
            for comm in comms:
                allreduce(comm)
            nccl.ncclGroupEnd()

    def memset() -> None:
        for _ in range(BATCH):
            cudart.cudaMemsetAsync(rptr, 0, ctypes.c_size_t(8), handle)

    def python_call() -> None:
        for _ in range(BATCH):
            nccl.ncclGetVersion(ctypes.byref(version))

    sync = stream.synchronize
    results.update({"nccl_version": version.value, "python_c_call_us": per_call_us(python_call, BATCH, sync),
                    "memset_async_us": per_call_us(memset, BATCH, sync),
                    "allreduce_alone_us": per_call_us(alone, BATCH, sync),
                    "allreduce_group_of_8_us": per_call_us(grouped, BATCH // GROUP, sync)})
    results["allreduce_in_group_per_gpu_us"] = results["allreduce_group_of_8_us"] / GROUP
    for comm in comms:
        nccl.ncclCommDestroy(comm)
    print(f"{results['device']}, torch {results['torch']}, NCCL {results['nccl_version']}")
    print(f"a call from Python {results['python_c_call_us']:.2f} us; "
          f"cudaMemsetAsync {results['memset_async_us']:.2f} us; ncclAllReduce alone "
          f"{results['allreduce_alone_us']:.2f} us; a group of {GROUP} {results['allreduce_group_of_8_us']:.2f} us "
          f"({results['allreduce_in_group_per_gpu_us']:.2f} us per GPU)")
    return saved(results, json_path)


if __name__ == "__main__":
    raise SystemExit(main())
