"""LoRA adapters on the synthetic decoder: the base frozen, a low-rank pair beside each adapted projection.

Each adapted projection `name` of an Attention or MLP module gets `name_lora_a` (d_in -> r) and `name_lora_b`
(r -> d_out), B starting at zero so that the first step computes the base model exactly (Hu et al. 2021). The
modules call them through `adapted()`, so tensor parallelism can split the adapters beside their projection:
a column-parallel projection's B is column-parallel too (A sees the replicated input), a row-parallel
projection's A is row-parallel (B sees its all-reduced, replicated output).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from linkscope.model.step.peft import Peft

ATTN = ("q", "k", "v", "o")
MLP_NAMES = ("gate", "up", "down")
ROW_PARALLEL = ("o", "down")
"""Projections whose input is split under tensor parallelism (the rest split their output)."""


def target_names(targets: str) -> dict[str, tuple[str, ...]]:
    """Submodule (`attn`, `mlp`) -> projections that carry adapters for `targets` (attn, attn-mlp, all)."""
    return {"attn": ATTN} if targets == "attn" else {"attn": ATTN, "mlp": MLP_NAMES}


def add_lora(model: nn.Module, peft: Peft) -> int:
    """Freeze every weight of `model` and add adapters to its layers; returns the trainable parameters."""
    for p in model.parameters():
        p.requires_grad_(False)
    trainable = 0
    for layer in model.get_submodule("layers").children():
        for part, names in target_names(peft.targets).items():
            module = getattr(layer, part)
            for name in names:
                base = getattr(module, name, None)
                if not isinstance(base, nn.Linear):
                    continue  # a plain MLP has no gate
                a = nn.Linear(base.in_features, peft.rank, bias=False)
                b = nn.Linear(peft.rank, base.out_features, bias=False)
                nn.init.kaiming_uniform_(a.weight, a=math.sqrt(5))
                nn.init.zeros_(b.weight)
                setattr(module, f"{name}_lora_a", a)
                setattr(module, f"{name}_lora_b", b)
                trainable += a.weight.numel() + b.weight.numel()
    return trainable


def adapted(module: nn.Module, name: str, x: torch.Tensor) -> torch.Tensor:
    """`module.name(x)`, plus its adapter's output where it has one."""
    out = getattr(module, name)(x)
    a = getattr(module, f"{name}_lora_a", None)
    if a is None:
        return out
    return out + getattr(module, f"{name}_lora_b")(a(x))


def lora_plan(targets: str) -> dict[str, str]:
    """The tensor-parallel style of each adapter matrix that splits, `attn.q_lora_b` -> `colwise`."""
    plan = {}
    for part, names in target_names(targets).items():
        for name in names:
            if name in ROW_PARALLEL:
                plan[f"{part}.{name}_lora_a"] = "rowwise"
            else:
                plan[f"{part}.{name}_lora_b"] = "colwise"
    return plan

