"""The MoE layer of the synthetic decoder: a router, experts sharded over the expert-parallel ranks, and tokens moved
to and from them with `all_to_all_single`, as Megatron-Core's alltoall dispatcher moves them.

Each token's router picks `topk` experts (softmax, then the top k, weights renormalised); one row per (token,
expert) copy, sorted by expert, goes to the expert's rank (dispatch), the rank runs its experts on what it
received, and the results come back the same way (combine) to be summed with their weights. With `ep` 1 every
rank holds every expert and nothing moves. The exchange is `all_to_all_single`
(its autograd form, `_functional_collectives.all_to_all_single_autograd`), which carries gradients back through
the reverse exchange, so backward moves the same bytes again.

Every local expert runs every step, on no rows when it received none, so that its weights are always part of the
graph (an unused parameter would stall DDP's reducer).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from linkscope.model.step.transformer import ModelConfig


class MoE(nn.Module):
    """Routed experts (this rank's `experts / ep` of them) and the optional shared experts."""

    def __init__(self, m: ModelConfig, ep: int = 1, ep_rank: int = 0, group: dist.ProcessGroup | None = None) -> None:
        from linkscope.bench.train.model import MLP

        super().__init__()
        self.topk = m.topk
        self.ep = ep
        self.per_rank = m.experts // ep
        self.first = ep_rank * self.per_rank
        self.group = group
        self.router = nn.Linear(m.hidden, m.experts, bias=False)
        self.experts = nn.ModuleList(MLP(m, m.moe_ffn_hidden) for _ in range(self.per_rank))
        self.shared = MLP(m, m.moe_ffn_hidden * m.shared_experts) if m.shared_experts else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq, hidden)."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        probs = F.softmax(self.router(flat).float(), dim=-1)
        weights, picked = probs.topk(self.topk, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(flat.dtype)
        order = torch.argsort(picked.flatten(), stable=True)
        token_of = order // self.topk
        expert_of = picked.flatten()[order]
        rows = flat.index_select(0, token_of)
        rows = self._remote(rows, expert_of) if self.ep > 1 else self._local(rows, expert_of)
        weighted = rows * weights.flatten()[order].unsqueeze(-1)
        out = torch.zeros_like(flat).index_add(0, token_of, weighted)
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view(shape)

    def _local(self, rows: torch.Tensor, expert_of: torch.Tensor) -> torch.Tensor:
        """Rows sorted by expert (global ids `first`...) through their experts, in the same order."""
        counts = torch.bincount(expert_of - self.first, minlength=self.per_rank).tolist()
        parts = torch.split(rows, counts)
        return torch.cat([expert(part) for expert, part in zip(self.experts, parts)])

    def _remote(self, rows: torch.Tensor, expert_of: torch.Tensor) -> torch.Tensor:
        """Dispatch the rows to their experts' ranks, run the local experts, combine the results back."""
        from torch.distributed._functional_collectives import all_to_all_single_autograd

        group = self.group if self.group is not None else dist.distributed_c10d._get_default_group()
        send_counts = torch.bincount(expert_of // self.per_rank, minlength=self.ep)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=self.group)
        send_splits, recv_splits = send_counts.tolist(), recv_counts.tolist()
        recv_experts = expert_of.new_empty(sum(recv_splits))
        dist.all_to_all_single(recv_experts, expert_of, recv_splits, send_splits, group=self.group)
        received = all_to_all_single_autograd(rows, recv_splits, send_splits, group)
        # Rows arrive grouped by source rank; the local experts take them grouped by expert, and give them back.
        by_expert = torch.argsort(recv_experts, stable=True)
        done = self._local(received.index_select(0, by_expert), recv_experts.index_select(0, by_expert))
        back = torch.empty_like(done).index_copy(0, by_expert, done)
        return all_to_all_single_autograd(back, send_splits, recv_splits, group)
