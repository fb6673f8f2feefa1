"""What a what-if interconnect costs: the price per GPU-hour of the closest real offering, or the user's own.

An NVSwitch node and a PCIe box of the same GPU are not rented at the same price, so a comparison that holds the
price constant says only that faster is cheaper. Each variant is priced instead as the catalog sells the nearest
thing to it: the same GPU family in the same scale-up class (PCIe, NVLink mesh, NVSwitch, a rack-scale domain),
preferring the same network between nodes (for a job across nodes, something bookable across nodes), a node at
least as large, the same board, and a confirmed price; among equals the cheapest, as a buyer would. Where the
catalog sells nothing of that class, the variant keeps the price of the offering it was built from, and says so.
`--price-per-gpu-hour` replaces all of this with one price.
"""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.advise.variants import Variant, scale_up_class
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering

USER_PRICE = "--price-per-gpu-hour"
NO_PLAN = "no plan"
"""The source of a training variant that no bookable offering runs: it has no price."""


@dataclass(frozen=True)
class PriceBasis:
    """The price one variant is costed at, whose it is, and how close that offering is to the variant."""

    usd_per_gpu_hour: float | None
    source: str
    """The offering id whose price it is, or USER_PRICE."""
    match: str
    """`same GPU, scale-up and network`, or what differs (`other network: efa`, `no PCIe offering of H200`)."""

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return dict(self.__dict__)


def user_price(usd_per_gpu_hour: float) -> PriceBasis:
    """Every variant at the price the user gave."""
    return PriceBasis(usd_per_gpu_hour, USER_PRICE, "the price given")


def _score(o: Offering, v: Variant, gpu_id: str) -> tuple[bool, bool, bool, bool, bool, float]:
    """Closer first: network, bookable across nodes, node size, board, confirmed price, then the cheaper."""
    node = o.system.node
    spans = v.system.nodes > 1
    fabric = v.fabric in ("none", node.scale_out.fabric) or not spans
    # A job across nodes is priced as something that can be booked across nodes.
    clusters = not spans or (node.scale_out.fabric != "none" and o.multi_node is not False)
    return (fabric, clusters, node.gpus >= v.system.node.gpus, node.gpu.id == gpu_id,
            "price_per_hour" not in o.unconfirmed, -(o.price_per_gpu_hour or 0.0))


def _differences(o: Offering, v: Variant) -> list[str]:
    node, want = o.system.node, v.system.node
    out = []
    if node.gpu.id != want.gpu.id:
        out.append(f"other board: {node.gpu.id}")
    if v.system.nodes > 1 and (node.scale_out.fabric == "none" or o.multi_node is False):
        out.append("single node only")
    elif v.system.nodes > 1 and v.fabric not in ("none", node.scale_out.fabric):
        out.append(f"other network: {node.scale_out.fabric}")
    elif v.system.nodes > 1 and v.fabric == "tcp" and node.scale_out.transport:
        out.append(f"TCP through {node.scale_out.transport}, not sockets")
    if node.gpus < want.gpus:
        out.append(f"{node.gpus}-GPU node")
    if "price_per_hour" in o.unconfirmed:
        out.append("price unconfirmed")
    return out


def closest_price(v: Variant, offered: Offering, db: HardwareDB) -> PriceBasis:
    """The price of the real offering closest to variant `v` of `offered` (see the module docstring)."""
    gpu = v.system.node.gpu
    wanted = v.scale_up_class
    same = [o for o in db.offerings.values() if o.price_per_gpu_hour is not None
            and o.system.node.gpu.family_name == gpu.family_name and scale_up_class(o.system.node.scale_up) == wanted]
    if not same:
        name = CLASS_NAMES.get(wanted, wanted)
        return PriceBasis(offered.price_per_gpu_hour, offered.id,
                          f"no {name} offering of {gpu.family_name} in the catalog: {offered.id}'s price")
    best = max(same, key=lambda o: (_score(o, v, gpu.id), o.id))
    differs = _differences(best, v)
    exact = "same GPU, scale-up and network" if v.system.nodes > 1 else "same GPU and scale-up"
    return PriceBasis(best.price_per_gpu_hour, best.id, "; ".join(differs) or exact)


CLASS_NAMES = {"pcie": "PCIe", "nvlink-mesh": "NVLink-mesh", "nvswitch": "NVSwitch", "rack": "rack-scale NVSwitch",
                "nvlink-bridge": "NVLink-bridge", "xgmi-mesh": "xGMI-mesh"}
