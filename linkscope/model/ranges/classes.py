"""Which evidence a prediction's range comes from: its kind, its fabric class and its size regime.

A class is the scale-up kind (NVSwitch, an NVLink/xGMI mesh or bridge, PCIe) and, across nodes, the scale-out
fabric (InfiniBand, RoCE, EFA, TCP), with the size regime (one node or several). One NVSwitch node and two
cloud clusters miss in different ways, so each class's range is made of its own evidence only.
"""

from __future__ import annotations

import re

from linkscope.hardware.system import System

SCALE_UP_CLASS = {"nvswitch": "NVSwitch", "nvlink-mesh": "mesh", "nvlink-bridge": "mesh", "xgmi-mesh": "mesh",
                  "pcie": "PCIe", "host": "PCIe"}
SCALE_OUT_CLASS = {"infiniband": "IB", "roce": "RoCE", "efa": "EFA", "tcp": "TCP", "none": "no network"}


def fabric_class(system: System, nodes: int | None = None, trays: int | None = None) -> str:
    """`NVSwitch, one node` or `NVSwitch x IB, several nodes`: what a prediction on `nodes` nodes as NCCL counts
    them (default: the System's own; the trays of one NVLink domain are one) of `system` is compared with.

    A prediction over several trays (`trays` nodes; default the System's own count) of an NVLink domain that spans
    nodes (GB200/GB300 NVL72) is a class of its own, `NVSwitch across trays, one NVLink domain` or `... x IB,
    several NVLink domains`: NVLink across trays is neither one node's NVSwitch nor a fabric between nodes."""
    n = system.nccl_nodes if nodes is None else nodes
    up = SCALE_UP_CLASS[system.node.scale_up.kind]
    if system.domain_spans_nodes and (system.nodes if trays is None else trays) > 1:
        if n <= 1:
            return f"{up} across trays, one NVLink domain"
        return f"{up} across trays x {SCALE_OUT_CLASS[system.node.scale_out.fabric]}, several NVLink domains"
    if n <= 1:
        return f"{up}, one node"
    return f"{up} x {SCALE_OUT_CLASS[system.node.scale_out.fabric]}, several nodes"


LINK_KINDS = frozenset({"collectives", "moe", "disaggregated"})
"""Kinds whose time is the interconnect's: their evidence is shared by GPUs of one scale-up link generation."""


def gpu_family(system: System, kind: str = "training") -> str:
    """The family a prediction's evidence must share: the GPU's (`A100`, `H100`, `MI300X`, ...), whose SMs and HBM
    set a training step or a serving step; for a collective, an MoE dispatch or a KV transfer (LINK_KINDS) its
    scale-up link generation (`NVLink 4` for H100, H200 and H800 alike), which sets what a GPU's SMs do not."""
    if kind not in LINK_KINDS:
        return system.node.gpu.family_name
    return link_generation_name(system.node.scale_up.generation)


def link_generation_name(generation: str) -> str:
    """`NVLink 4` for `nvlink4`, `Infinity Fabric 4` for `infinity-fabric4`, `PCIe 4` for `pcie4`."""
    match = re.fullmatch(r"(nvlink|infinity-fabric|pcie)-?(\w+)", generation)
    if match is None:
        return generation
    names = {"nvlink": "NVLink", "infinity-fabric": "Infinity Fabric", "pcie": "PCIe"}
    return f"{names[match.group(1)]} {match.group(2).upper() if not match.group(2).isdigit() else match.group(2)}"


def parent_class(cls: str) -> str:
    """`NVSwitch, several nodes` for `NVSwitch x RoCE, several nodes`: the scale-up kind and size regime, any
    scale-out fabric. A class without evidence of its own borrows its siblings' (docs/model.md)."""
    head, _, regime = cls.rpartition(", ")
    return f"{head.split(' x ')[0]}, {regime}" if head else cls
