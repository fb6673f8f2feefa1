"""A Llama-style decoder in plain PyTorch, built from the same ModelConfig that `predict train` takes.

Pre-norm blocks: RMSNorm, causal self-attention with grouped-query heads and rotary positions, RMSNorm, a gated
(SwiGLU) or plain (GELU) MLP; untied input embedding and output projection, as `ModelConfig.total_params` counts
them. Attention infers its local head count from the projection's width, so tensor parallelism can split the
projections without the module knowing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from linkscope.bench.train.lora import adapted
from linkscope.model.step.transformer import ModelConfig

ROPE_BASE = 10000.0


class RMSNorm(nn.Module):
    """Root-mean-square layer norm (Llama)."""

    def __init__(self, width: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise the last dimension."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(seq_len: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, (seq_len, head_dim / 2)."""
    inv = 1.0 / (ROPE_BASE ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on (batch, heads, seq, head_dim)."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


class Attention(nn.Module):
    """Causal self-attention; K and V have `kv_heads` heads shared by groups of query heads."""

    def __init__(self, m: ModelConfig) -> None:
        super().__init__()
        self.head_dim = m.head_dim
        self.q = nn.Linear(m.hidden, m.hidden, bias=False)
        self.k = nn.Linear(m.hidden, m.kv_dim, bias=False)
        self.v = nn.Linear(m.hidden, m.kv_dim, bias=False)
        self.o = nn.Linear(m.hidden, m.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq, hidden)."""
        b, s, _ = x.shape
        q = adapted(self, "q", x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = adapted(self, "k", x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = adapted(self, "v", x).view(b, s, -1, self.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        groups = q.shape[1] // k.shape[1]
        if groups > 1:
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return adapted(self, "o", out.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    """SwiGLU (three matrices) or GELU (two)."""

    def __init__(self, m: ModelConfig, width: int | None = None) -> None:
        super().__init__()
        width = width or m.ffn_hidden
        self.gated = m.gated_mlp
        self.up = nn.Linear(m.hidden, width, bias=False)
        self.gate = nn.Linear(m.hidden, width, bias=False) if m.gated_mlp else None
        self.down = nn.Linear(width, m.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq, hidden)."""
        if self.gate is not None:
            return adapted(self, "down", F.silu(adapted(self, "gate", x)) * adapted(self, "up", x))
        return adapted(self, "down", F.gelu(adapted(self, "up", x)))


class Block(nn.Module):
    """One pre-norm decoder layer; in an MoE layer the MLP is routed experts (`bench.train.moe`)."""

    def __init__(self, m: ModelConfig, moe: nn.Module | None = None) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(m.hidden)
        self.attn = Attention(m)
        self.mlp_norm = RMSNorm(m.hidden)
        self.mlp = moe if moe is not None else MLP(m)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x: (batch, seq, hidden)."""
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    """The whole model: embedding, `layers` blocks, final norm, output projection."""

    def __init__(self, m: ModelConfig, recompute: str = "none", ep: int = 1, ep_rank: int = 0,
                 group: torch.distributed.ProcessGroup | None = None) -> None:
        """`ep` > 1 shards an MoE model's experts over the ranks of `group` (None = every rank), this one
        `ep_rank`."""
        from linkscope.bench.train.moe import MoE

        super().__init__()
        self.config = m
        self.recompute = recompute
        self.embed = nn.Embedding(m.vocab, m.hidden)
        self.layers = nn.ModuleList(Block(m, MoE(m, ep, ep_rank, group) if is_moe_layer(m, i) else None)
                                    for i in range(m.layers))
        self.norm = RMSNorm(m.hidden)
        self.head = nn.Linear(m.hidden, m.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, seq, vocab) for tokens (batch, seq)."""
        cos, sin = rotary_tables(tokens.shape[1], self.config.head_dim, tokens.device)
        x = self.embed(tokens)
        for layer in self.layers:
            if self.recompute == "full" and self.training:
                # Full recomputation keeps only each layer's input and redoes its forward in backward.
                x = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        return self.head(self.norm(x))


def is_moe_layer(m: ModelConfig, index: int) -> bool:
    """Whether layer `index` has routed experts: after the first dense layers, every `moe_layer_interval`-th one,
    as `ModelConfig.moe_layers` counts them."""
    first = m.first_dense_layers + m.moe_layer_interval - 1
    return m.is_moe and index >= first and (index - first) % m.moe_layer_interval == 0


def expert_parameter_names(model: nn.Module) -> list[str]:
    """Names of the routed experts' parameters: each rank holds its own, so data parallelism must not average
    them."""
    from linkscope.bench.train.moe import MoE

    return [f"{name}.experts.{pname}" for name, module in model.named_modules() if isinstance(module, MoE)
            and module.ep > 1 for pname, _ in module.experts.named_parameters()]


def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy in fp32."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def parameter_count(model: nn.Module, trainable_only: bool = False) -> int:
    """Parameters of a module (only those that train, if asked), before any sharding."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
