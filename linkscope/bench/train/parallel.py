"""Wrapping the model for the layout asked: DDP (buckets, overlap, compression hooks), FSDP2 or tensor parallelism.

Everything here is PyTorch's own machinery, chosen and configured, never re-implemented: DDP's reducer and
its communication hooks, `fully_shard`, and `torch.distributed.tensor.parallel`. The one exception is
`--no-overlap`, which DDP cannot do by itself: gradients are then reduced after backward, bucket by bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from linkscope.bench.train.config import TrainConfig
from linkscope.bench.train.lora import lora_plan
from linkscope.bench.train.model import Decoder, expert_parameter_names

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

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


def wrap_model(model: Decoder, cfg: TrainConfig, device: torch.device, rank: int, world: int,
               group: dist.ProcessGroup | None = None) -> Wrapped:
    """The model wrapped for `cfg.layout` on this rank (tensor parallel inside data parallel when tp < world),
    over `group` (the first `world` ranks of a larger job) or, when None, over every rank."""
    if cfg.tp > 1:
        return _tensor_parallel(model, cfg, device, world, group)
    if cfg.layout == "fsdp":
        return _fsdp(model, cfg, train_mesh(device.type, (world,), None, group), rank, world)
    return _ddp(model, cfg, device, None, rank, world, group)


def train_mesh(device_type: str, shape: tuple[int, ...], names: tuple[str, ...] | None,
               group: dist.ProcessGroup | None) -> DeviceMesh:
    """A DeviceMesh of `shape` over every rank, or over the ranks of `group` alone. The ranks outside `group`
    take no part, so its sub-groups are created by their members only (`use_local_synchronization`)."""
    if group is None:
        return init_device_mesh(device_type, shape, mesh_dim_names=names)
    if len(shape) == 1:
        return DeviceMesh.from_group(group, device_type, mesh_dim_names=names)
    ranks = torch.tensor(dist.get_process_group_ranks(group)).view(shape)
    row, col = (int(i) for i in (ranks == dist.get_rank()).nonzero()[0])
    # Every rank creates its dp group (its column) and then its tp group (its row); disjoint groups are named by
    # their ranks, so they need not be created in the same order everywhere.
    lines = [ranks[:, col].tolist(), ranks[row, :].tolist()]
    groups = [dist.new_group(line, use_local_synchronization=True) for line in lines]
    return DeviceMesh.from_group(groups, device_type, mesh=ranks, mesh_dim_names=names)


def _ddp(model: Decoder, cfg: TrainConfig, device: torch.device, dp_mesh: DeviceMesh | None, data_rank: int,
         data_ranks: int, group: dist.ProcessGroup | None = None) -> Wrapped:
    """DDP over `group` (None = every rank), or over the dp dimension of a 2-D mesh (`dp_mesh`), where PyTorch's
    DDP turns the tensor-parallel DTensor parameters into local tensors and averages their gradients over the dp
    group only."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    own = expert_parameter_names(model)
    if own:
        # Expert-parallel experts are this rank's own; averaging them with other ranks' experts would be wrong.
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, own)
    ddp = DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=cfg.bucket_mb, device_mesh=dp_mesh,
                                  process_group=group if dp_mesh is None else None)
    group = dp_mesh.get_group() if dp_mesh is not None else group
    _register_compression(ddp, cfg.grad_compression, group, cfg.powersgd_rank)
    if cfg.overlap:
        return Wrapped(ddp, nullcontext, lambda: None, data_rank, data_ranks)
    # The parameters as DDP holds them: after a forward of a tensor-parallel model, the module's attributes are
    # DTensor views of these, and the gradients land here.
    params = list(ddp.parameters()) if not own else [p for n, p in model.named_parameters() if n not in set(own)]
    # DDP always overlaps; without it backward runs unsynchronised and the buckets are reduced afterwards.
    return Wrapped(ddp, ddp.no_sync, lambda: reduce_after_backward(params, cfg.bucket_mb, data_ranks, group),
                   data_rank, data_ranks)


def _register_compression(ddp: DistributedDataParallel, compression: str, group: dist.ProcessGroup | None,
                          rank: int = 1) -> None:
    """PyTorch's compression hook; `group` is the data-parallel group (None = every rank), which the hooks
    would otherwise take to be the whole world."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if compression == "fp16":
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif compression == "bf16":
        ddp.register_comm_hook(group, default_hooks.bf16_compress_hook)
    elif compression == "powersgd":
        # Compression from the third step on (PowerSGD's default waits 1000 steps, longer than any benchmark).
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=rank,
                                             start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def reduce_after_backward(params: list[nn.Parameter], bucket_mb: float, ranks: int,
                          group: dist.ProcessGroup | None = None) -> None:
    """Average the gradients over the `ranks` of `group` after backward, in buckets of `bucket_mb` like DDP's."""
    grads = [p.grad for p in params if p.grad is not None]
    limit = int(bucket_mb * MIB)
    bucket: list[torch.Tensor] = []
    size = 0
    for grad in reversed(grads):
        bucket.append(grad)
        size += grad.numel() * grad.element_size()
        if size >= limit:
            _reduce_bucket(bucket, ranks, group)
            bucket, size = [], 0
    if bucket:
        _reduce_bucket(bucket, ranks, group)


def _reduce_bucket(bucket: list[torch.Tensor], ranks: int, group: dist.ProcessGroup | None) -> None:
    flat = torch.cat([g.flatten() for g in bucket])
    dist.all_reduce(flat, group=group)
    flat /= ranks
    offset = 0
    for grad in bucket:
        grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
        offset += grad.numel()


def _fsdp(model: Decoder, cfg: TrainConfig, mesh: DeviceMesh, data_rank: int, data_ranks: int) -> Wrapped:
    """FSDP2 over a 1-D mesh: every rank, or the dp dimension of a 2-D mesh (as torchtitan composes it with TP)."""
    from torch.distributed.fsdp import fully_shard

    # ZeRO-3 frees each layer's gathered parameters after its forward; stages 1 and 2 keep them for backward.
    reshard = cfg.zero >= 3
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    return Wrapped(model, nullcontext, lambda: None, data_rank, data_ranks)


def _tensor_parallel(model: Decoder, cfg: TrainConfig, device: torch.device, world: int,
                     group: dist.ProcessGroup | None) -> Wrapped:
    """Megatron-style TP over `cfg.tp` ranks; with more ranks, a 2-D mesh (dp, tp), tp innermost as torchtitan
    lays it out (neighbouring ranks, on one node where the fast links are), and DDP or FSDP2 over dp."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dp = world // cfg.tp
    mesh = train_mesh(device.type, (dp, cfg.tp), ("dp", "tp"), group)
    plan: dict[str, Any] = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
                            "attn.o": RowwiseParallel(), "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}
    if model.config.gated_mlp:
        plan["mlp.gate"] = ColwiseParallel()
    if cfg.peft is not None:
        styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
        plan.update({name: styles[style]() for name, style in lora_plan(cfg.peft.targets).items()
                     if model.config.gated_mlp or "gate" not in name})
    for layer in model.layers:
        parallelize_module(layer, mesh["tp"], plan)
    # Every tensor-parallel rank of a dp group sees the same tokens; the replicated embedding and head get equal
    # gradients there, so only the dp dimension reduces them.
    if dp == 1:
        return Wrapped(model, nullcontext, lambda: None, 0, 1)
    dp_mesh = mesh["dp"]
    if cfg.zero:
        return _fsdp(model, cfg, dp_mesh, dp_mesh.get_local_rank(), dp)
    return _ddp(model, cfg, device, dp_mesh, dp_mesh.get_local_rank(), dp)
