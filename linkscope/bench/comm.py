"""One rank's communication context: the process group, the device, and the small control messages.

Control traffic (combining times, agreeing on iteration counts, summing wrong elements, barriers)
goes through a CPU (gloo) group. On the gloo backend that is the default group; on nccl a separate
gloo group, so control never queues behind, or is timed with, the collectives being measured.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from linkscope.bench.layout import RankEnv, RankInfo, local_rank_info
from linkscope.bench.ops import ALL_GATHER
from linkscope.bench.timing import Timer, make_timer
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import check_local_ranks


def cuda_available() -> bool:
    """Whether this process sees a CUDA device."""
    return torch.cuda.is_available()


def resolve_backend(requested: str) -> str:
    """`auto` becomes nccl with CUDA, else gloo; nccl without CUDA is a user error."""
    if requested == "auto":
        return "nccl" if cuda_available() else "gloo"
    if requested == "nccl" and not cuda_available():
        raise UserError("nccl needs CUDA GPUs, and none is visible here; use --backend gloo", field="backend")
    return requested


def default_nproc(backend: str) -> int:
    """Local ranks to start when --nproc is not given: every visible GPU, or 2 CPU ranks."""
    return torch.cuda.device_count() if backend == "nccl" else 2


def check_local_nproc(nproc: int, backend: str, oversubscribe: bool) -> None:
    """Local CPU ranks fit the cores here (UserError otherwise, before anything is spawned)."""
    if backend != "nccl":
        # The cores this process may run on (a container or taskset may allow fewer than the machine has).
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        check_local_ranks(nproc, backend, cores, 0, oversubscribe)


class Progress:
    """Counts this rank's steps so a watchdog can tell which rank stopped: 0 = not started,
    then 1 + 2 * (sizes done) + (1 while inside a size)."""

    def __init__(self, publish: Callable[[int], None]) -> None:
        self.value = 0
        self._publish = publish

    def advance(self) -> None:
        """One step further."""
        self.value += 1
        self._publish(self.value)

    def skip(self, steps: int) -> None:
        """`steps` further at once: a rank that sits a point out (`--scaling` under torchrun) stays level with
        the ranks that run it, so a stall still names the rank that stopped."""
        self.value += steps
        self._publish(self.value)


@dataclass
class RankContext:
    """Everything a rank needs to run and time collectives."""

    env: RankEnv
    backend: str
    device: torch.device
    ctrl: Any
    """The control process group (gloo)."""
    timer: Timer
    progress: Progress
    info: RankInfo
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    group: Any = None
    """The process group the job's own collectives run over; None = the default group (every rank)."""

    @property
    def rank(self) -> int:
        """This rank."""
        return self.env.rank

    @property
    def world(self) -> int:
        """The number of ranks."""
        return self.env.world

    def barrier(self) -> None:
        """Wait for this rank's outstanding work, then for every rank."""
        self.timer.wait()
        dist.barrier(group=self.ctrl)

    def allreduce_float(self, value: float, how: str) -> float:
        """Reduce one number over ranks: `sum`, `min` or `max`."""
        ops = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
        tensor = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(tensor, op=ops[how], group=self.ctrl)
        return float(tensor.item())

    def broadcast_float(self, value: float, src: int = 0) -> float:
        """Rank `src`'s number, on every rank."""
        tensor = torch.tensor([value], dtype=torch.float64)
        dist.broadcast(tensor, src=src, group=self.ctrl)
        return float(tensor.item())

    def allgather_int(self, value: int) -> list[int]:
        """Every rank's integer, in rank order."""
        out = torch.zeros(self.world, dtype=torch.int64)
        ALL_GATHER(out, torch.tensor([value], dtype=torch.int64), group=self.ctrl)
        return [int(v) for v in out.tolist()]

    def gather_infos(self) -> list[RankInfo]:
        """Every rank's RankInfo (all ranks get the list)."""
        infos: list[Any] = [None] * self.world
        dist.all_gather_object(infos, self.info, group=self.ctrl)
        return infos

    def close(self) -> None:
        """Tear the process groups down."""
        for fn in self.cleanup:
            fn()
        if dist.is_initialized():
            dist.destroy_process_group()


def _device_identity(backend: str, local_rank: int) -> tuple[torch.device, int, str, str]:
    if backend != "nccl":
        return torch.device("cpu"), 0, "cpu", _cpu_name()
    torch.cuda.set_device(local_rank)
    props = torch.cuda.get_device_properties(local_rank)
    return torch.device("cuda", local_rank), local_rank, pci_label(props), props.name


def pci_label(props: Any) -> str:
    """nccl-tests' `[domain:bus:device]` (e.g. `0000:04:00`) from CUDA device properties, `?` when unknown."""
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if any(p is None for p in parts):
        return "?"
    domain, bus, device = parts
    return f"{domain:04x}:{bus:02x}:{device:02x}"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return "CPU " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU"


def init_rank(
    env: RankEnv,
    backend: str,
    init_method: str,
    timeout_s: float,
    publish: Callable[[int], None],
    cudagraph: int = 0,
) -> RankContext:
    """Join the process group (and, on nccl, create the gloo control group)."""
    device, index, bus, name = _device_identity(backend, env.local_rank)
    if backend == "gloo" and "OMP_NUM_THREADS" not in os.environ:
        # CPU ranks share the host's cores; torch's default of every core per process oversubscribes them.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, env.local_world)))
    kwargs: dict[str, Any] = {}
    if backend == "nccl" and "device_id" in inspect.signature(dist.init_process_group).parameters:
        # Binds the communicator to this GPU up front (torch >= 2.3); older releases pick it lazily.
        kwargs["device_id"] = device
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=env.rank,
        world_size=env.world,
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )
    ctrl = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s)) if backend == "nccl" else None
    progress = Progress(publish)
    progress.advance()
    info = local_rank_info(env, index, bus, name)
    return RankContext(env, backend, device, ctrl, make_timer(backend, cudagraph), progress, info)
