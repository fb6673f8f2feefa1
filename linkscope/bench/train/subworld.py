"""The first k ranks of a torchrun job as a world of their own: how `--scaling` runs under torchrun.

    sub = first_ranks(ctx, 2, timeout_s)   # on ranks 0 and 1 only
    ...run the point with sub...
    release(sub, ctx)

torchrun numbers ranks node by node, so the first k ranks of a job over N nodes are whole nodes whenever k is
a multiple of the ranks per node: one launch measures 1 node, 2 nodes, ... The ranks past k take no part; they
wait for the point to end on `wait_group()`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from linkscope.bench.comm import RankContext

WAIT = timedelta(days=1)
"""How long a rank sitting a point out may wait: a point can run far longer than --timeout (which is about a
rank making no progress, and is rank 0's guard's to enforce); a rank that dies ends the waiters through torchrun."""


def wait_group() -> Any:
    """A gloo group of every rank for waiting out a point (every rank calls this, once)."""
    return dist.new_group(backend="gloo", timeout=WAIT)


def first_ranks(ctx: RankContext, ranks: int, timeout_s: float) -> RankContext:
    """`ctx` narrowed to ranks 0..ranks-1: their own process group for the training and, on nccl, their own
    gloo control group. Only those ranks call this (the groups are created by their members alone)."""
    if ranks == ctx.world:
        return ctx
    members = list(range(ranks))
    timeout = timedelta(seconds=timeout_s)
    group = dist.new_group(members, timeout=timeout, use_local_synchronization=True)
    ctrl = group
    if ctx.backend == "nccl":
        ctrl = dist.new_group(members, backend="gloo", timeout=timeout, use_local_synchronization=True)
    env = replace(ctx.env, world=ranks, local_world=min(ctx.env.local_world, ranks))
    return replace(ctx, env=env, ctrl=ctrl, group=group, cleanup=[])


def release(sub: RankContext, ctx: RankContext) -> None:
    """Tear down what `first_ranks` created (after a point that ended normally)."""
    if sub is ctx:
        return
    for group in {id(g): g for g in (sub.group, sub.ctrl)}.values():
        dist.destroy_process_group(group)
