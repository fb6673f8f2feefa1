"""Wrapping the model for the layout asked: DDP (buckets, overlap, compression hooks), FSDP2 or tensor parallelism.

Everything here is PyTorch's own machinery, chosen and configured, never re-implemented: DDP's reducer and
its communication hooks, `fully_shard`, and `torch.distributed.tensor.parallel`. The one exception is
`--no-overlap`, which DDP cannot do by itself: gradients are then reduced after backward, bucket by bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from linkscope.bench.train.config import TrainConfig
from linkscope.bench.train.model import Decoder

MIB = 1 << 20


@dataclass
class Wrapped:
    """The model to call, how to run backward without synchronising, and what to do after backward."""

    module: nn.Module
    sync_context: Callable[[], AbstractContextManager[Any]]
    after_backward: Callable[[], None]
    data_rank: int
    """Which shard of the synthetic data this rank reads (tensor-parallel ranks read the same)."""
    data_ranks: int


def wrap_model(model: Decoder, cfg: TrainConfig, device: torch.device, rank: int, world: int) -> Wrapped:
    """The model wrapped for `cfg.layout` on this rank."""
    if cfg.layout == "tp":
        return _tensor_parallel(model, cfg, device, world)
    if cfg.layout == "fsdp":
        return _fsdp(model, cfg, device, rank, world)
    return _ddp(model, cfg, device, rank, world)


def _ddp(model: Decoder, cfg: TrainConfig, device: torch.device, rank: int, world: int) -> Wrapped:
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=cfg.bucket_mb)
    _register_compression(ddp, cfg.grad_compression)
    if cfg.overlap:
        return Wrapped(ddp, nullcontext, lambda: None, rank, world)
    # DDP always overlaps; without it backward runs unsynchronised and the buckets are reduced afterwards.
    return Wrapped(ddp, ddp.no_sync, lambda: reduce_after_backward(model, cfg.bucket_mb, world), rank, world)


def _register_compression(ddp: nn.Module, compression: str) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if compression == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)  # type: ignore[operator]
    elif compression == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)  # type: ignore[operator]
    elif compression == "powersgd":
        # Compression from the third step on (PowerSGD's default waits 1000 steps, longer than any benchmark).
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)  # type: ignore[operator]


def reduce_after_backward(model: nn.Module, bucket_mb: float, world: int) -> None:
    """Average the gradients over ranks after backward, in buckets of `bucket_mb` like DDP's."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    limit = int(bucket_mb * MIB)
    bucket: list[torch.Tensor] = []
    size = 0
    for grad in reversed(grads):
        bucket.append(grad)
        size += grad.numel() * grad.element_size()
        if size >= limit:
            _reduce_bucket(bucket, world)
            bucket, size = [], 0
    if bucket:
        _reduce_bucket(bucket, world)


def _reduce_bucket(bucket: list[torch.Tensor], world: int) -> None:
    flat = torch.cat([g.flatten() for g in bucket])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for grad in bucket:
        grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
        offset += grad.numel()


def _fsdp(model: Decoder, cfg: TrainConfig, device: torch.device, rank: int, world: int) -> Wrapped:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world,))
    # ZeRO-3 frees each layer's gathered parameters after its forward; stages 1 and 2 keep them for backward.
    reshard = cfg.zero >= 3
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    return Wrapped(model, nullcontext, lambda: None, rank, world)


def _tensor_parallel(model: Decoder, cfg: TrainConfig, device: torch.device, world: int) -> Wrapped:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device.type, (world,))
    plan: dict[str, Any] = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
                            "attn.o": RowwiseParallel(), "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}
    if model.config.gated_mlp:
        plan["mlp.gate"] = ColwiseParallel()
    for layer in model.layers:
        parallelize_module(layer, mesh, plan)
    # Every tensor-parallel rank sees the same tokens; the replicated embedding and head get equal gradients.
    return Wrapped(model, nullcontext, lambda: None, 0, 1)
