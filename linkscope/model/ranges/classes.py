"""Which evidence a prediction's range comes from: its kind, its fabric class and its size regime.

A class is the scale-up kind (NVSwitch, an NVLink/xGMI mesh or bridge, PCIe) and, across nodes, the scale-out
fabric (InfiniBand, RoCE, EFA, TCP), with the size regime (one node or several). One NVSwitch node and two
cloud clusters miss in different ways, so each class's range is made of its own evidence only.
"""

from __future__ import annotations

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


def gpu_family(system: System) -> str:
    """The GPU family a prediction's evidence must share (`A100`, `H100`, `MI300X`, ...)."""
    return system.node.gpu.family_name
