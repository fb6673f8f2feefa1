"""What every rank of `bench kv` runs: the prefill-side half sends its requests' pages to the decode-side half.

Per point (a block size and a number of requests in flight) every page is one message, posted together as serving
engines post a request's descriptor list: one `batch_isend_irecv` of every page (gloo on CPU, NCCL send/recv on GPU,
chosen by the backend at run time). The buffers are laid out once per point; only the transfer is timed, after a
barrier on the control group, with the backend's timer (wall clock on gloo, CUDA events on nccl), and per timed
iteration the slowest rank's time counts, as nccl-tests combines ranks. The first transfer of each point is checked:
every page carries its index and its sender in its first two bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from linkscope.bench import faults
from linkscope.bench.comm import RankContext
from linkscope.bench.events import KvSink
from linkscope.bench.kv.config import FAULT_OP, KvConfig
from linkscope.hardware.errors import UserError

GPU_MEMORY_HEADROOM = 1.25
"""A GPU rank needs its pages plus a quarter for NCCL's own buffers and the allocator."""


def peer_of(rank: int, world: int) -> tuple[bool, int]:
    """(sends, peer): the first half sends to the rank half a world above it."""
    half = world // 2
    return (rank < half, rank + half if rank < half else rank - half)


def _pages(ctx: RankContext, cfg: KvConfig, block: int, count: int, sends: bool) -> torch.Tensor:
    """`count` requests' pages, one row each; a sender's rows carry their index and the sender's rank."""
    rows, width = count * cfg.pages(block), cfg.page_bytes(block)
    if ctx.device.type == "cuda":
        free_bytes = torch.cuda.mem_get_info(ctx.device)[0]
        if rows * width * GPU_MEMORY_HEADROOM > free_bytes:
            raise UserError(f"{rows * width / 2**30:.1f} GiB of pages do not fit the {free_bytes / 2**30:.1f} GiB "
                            "free on the GPU; give fewer --tokens or --in-flight")
    if not sends:
        return torch.zeros((rows, width), dtype=torch.uint8, device=ctx.device)
    pages = torch.ones((rows, width), dtype=torch.uint8, device=ctx.device)
    pages[:, 0] = (torch.arange(rows, device=ctx.device) % 256).to(torch.uint8)
    if width > 1:
        pages[:, 1] = ctx.rank % 256
    return pages


def transfer_call(ctx: RankContext, pages: torch.Tensor, sends: bool, peer: int) -> Callable[[], None]:
    """Post every page to (or from) the peer at once and wait for all of them."""
    op = dist.isend if sends else dist.irecv
    ops = [dist.P2POp(op, pages[i], peer, group=ctx.group) for i in range(pages.shape[0])]

    def transfer() -> None:
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return transfer


def _wrong_pages(pages: torch.Tensor, sender: int) -> int:
    """Received pages whose first bytes do not say they are this index from this sender."""
    rows = pages.shape[0]
    expect = (torch.arange(rows, device=pages.device) % 256).to(torch.uint8)
    wrong = pages[:, 0] != expect
    if pages.shape[1] > 1:
        wrong |= pages[:, 1] != sender % 256
    return int(wrong.sum().item())


def _slowest(ctx: RankContext, seconds: list[float]) -> list[float]:
    tensor = torch.tensor(seconds, dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=ctx.ctrl)
    return [float(v) for v in tensor.tolist()]


def time_point(ctx: RankContext, cfg: KvConfig, block: int, count: int, first: int = 0) -> tuple[list[float], int]:
    """This rank's seconds per timed transfer of one point, and its wrong pages (0 on a sender). `first`: how many
    transfers earlier points timed (the fault hook counts transfers across the run)."""
    sends, peer = peer_of(ctx.rank, ctx.world)
    pages = _pages(ctx, cfg, block, count, sends)
    transfer = transfer_call(ctx, pages, sends, peer)
    transfer()
    ctx.timer.wait()
    wrong = 0 if sends else _wrong_pages(pages, peer)
    for _ in range(cfg.warmup):
        transfer()
    ctx.timer.wait()
    seconds = []
    for i in range(cfg.iters):
        faults.before_size(ctx.rank, FAULT_OP, first + i)
        ctx.barrier()
        seconds.append(ctx.timer.loop_seconds(transfer, 1, None))
        ctx.progress.advance()
    return seconds, wrong


def run_kv(ctx: RankContext, cfg: KvConfig, sink: KvSink) -> None:
    """Every point in turn; rank 0 reports each as soon as it is timed."""
    for index, (block, count) in enumerate(cfg.points()):
        seconds, wrong = time_point(ctx, cfg, block, count, index * cfg.iters)
        slowest = _slowest(ctx, seconds)
        wrong_by_rank = ctx.allgather_int(wrong)
        if ctx.rank == 0:
            sink.kv_point(point_record(cfg, block, count, slowest, wrong_by_rank))


def point_record(cfg: KvConfig, block: int, count: int, seconds: list[float], wrong: list[int]) -> dict[str, Any]:
    """What is stored for one point: its geometry per pair and the slowest rank's seconds per transfer."""
    pages = cfg.pages(block) * count
    return {"block_tokens": block, "in_flight": count, "messages_per_pair": pages,
            "page_bytes": cfg.page_bytes(block), "bytes_per_pair": pages * cfg.page_bytes(block),
            "seconds": seconds, "wrong_pages": wrong}


def where_label(cfg: KvConfig) -> Callable[[int], str]:
    """Progress counter -> words: 0 starting, then one per timed transfer of each point in turn."""
    points = cfg.points()

    def where(value: int) -> str:
        if value <= 0:
            return "while starting"
        index = min((value - 1) // cfg.iters, len(points) - 1)
        block, count = points[index]
        done = (value - 1) % cfg.iters
        return f"in transfer {done + 1} of {cfg.iters} at block {block}, {count} in flight"

    return where
