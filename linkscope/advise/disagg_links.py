"""`advise infer --disaggregated --compare-interconnect`: the same service colocated, and disaggregated with its KV
cache over the node's scale-up link, over RDMA between nodes and over TCP between nodes, each at its price.

The offering is the first plan's. Colocated is `advise infer`'s answer on one node; over the scale-up link the pools
share one node; over RDMA and TCP each pool has its own node (two nodes), on the node type with InfiniBand (or the
offering's own RDMA fabric) and with TCP at the node's NIC count and rate. Each row is searched (TPs, ratio, batch)
as `advise infer --disaggregated` searches, with the transport held, and priced as the closest real offering sells
that interconnect (`price_basis`) or at `--price-per-gpu-hour`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from linkscope.advise.disagg import DisaggRequest, OfferingAnswer, Plan, answer_offering
from linkscope.advise.price_basis import PriceBasis, closest_price, user_price
from linkscope.advise.variants import Variant, as_offered, variants
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.model.step.kv_transfer import scale_up_path


@dataclass
class LinkRow:
    """One way to serve: colocated, or disaggregated over one KV link."""

    serving: str
    kv_link: str
    price: PriceBasis
    plan: Plan | None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"serving": self.serving, "kv_link": self.kv_link, "price": self.price.as_dict(),
                "plan": self.plan.as_dict() if self.plan else None, "reason": self.reason}


@dataclass
class LinkComparison:
    """The rows, the offering they start from, and how they were priced."""

    offering: str
    gpu: str
    rows: list[LinkRow]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"offering": self.offering, "gpu": self.gpu, "rows": [r.as_dict() for r in self.rows],
                "notes": self.notes}


def _priced(v: Variant, offering: Offering, db: HardwareDB, price_per_gpu_hour: float | None) -> PriceBasis:
    if price_per_gpu_hour is not None:
        return user_price(price_per_gpu_hour)
    if v.as_offered:
        return PriceBasis(offering.price_per_gpu_hour, offering.id, "as offered")
    return closest_price(v, offering, db)


def _as(offering: Offering, v: Variant, price: PriceBasis) -> Offering:
    """The offering rebuilt as the variant (one node of it, bookable across nodes), at the variant's price."""
    node_price = None if price.usd_per_gpu_hour is None else price.usd_per_gpu_hour * v.system.node.gpus
    return replace(offering, id=f"{offering.id} ({v.scale_out_label})" if not v.as_offered else offering.id,
                   system=replace(v.system.with_nodes(1), max_nodes=None), price_per_hour=node_price, unconfirmed=(),
                   multi_node=True)


def _row(serving: str, kv_link: str, answer: OfferingAnswer, price: PriceBasis, kind: str) -> LinkRow:
    plan = answer.colocated if kind == "colocated" else answer.disaggregated
    reason = None if plan is not None else answer.reason or f"no {kind} plan meets the budgets"
    return LinkRow(serving, kv_link, price, plan, reason)


def _network(offering: Offering, db: HardwareDB, fabric: str) -> Variant | None:
    """The offering's node type with `fabric` between nodes (its own network when it is that fabric)."""
    node_system = offering.system.with_nodes(1)
    offered = as_offered(node_system)
    if offered.fabric == fabric or (fabric == "infiniband" and node_system.node.scale_out.is_rdma):
        return offered
    return next((v for v in variants(node_system, db, fabrics=True, keep_gpus=False)
                 if v.scale_up_class == offered.scale_up_class and v.fabric == fabric), None)


def compare_kv_links(request: DisaggRequest, offering: Offering, db: HardwareDB,
                     price_per_gpu_hour: float | None = None) -> LinkComparison:
    """Colocated, and disaggregated over the scale-up link, RDMA and TCP, on the offering's GPU."""
    offered = as_offered(offering.system.with_nodes(1))
    own_price = _priced(offered, offering, db, price_per_gpu_hour)
    here = _as(offering, offered, own_price)
    inside = replace(request, kv=replace(request.kv, transport="nvlink"), node_counts=(1,))
    link_name = scale_up_path(offering.system)
    rows = [_row("colocated", "none", answer_offering(here, request, {})[0], own_price, "colocated")]
    if link_name == "pcie":
        rows.append(LinkRow("disaggregated", "pcie", own_price, None, "no NVLink in the node"))
    else:
        rows.append(_row("disaggregated", f"{link_name} (one node)", answer_offering(here, inside, {})[0], own_price,
                         "disaggregated"))
    for fabric, transport in (("infiniband", "rdma"), ("tcp", "tcp")):
        v = _network(offering, db, fabric)
        if v is None:
            rows.append(LinkRow("disaggregated", transport, own_price, None, f"no {fabric} variant of the node"))
            continue
        price = _priced(v, offering, db, price_per_gpu_hour)
        across = replace(request, kv=replace(request.kv, transport=transport), node_counts=(2,))
        rows.append(_row("disaggregated", f"{transport} ({v.scale_out_label}, two nodes)",
                         answer_offering(_as(offering, v, price), across, {})[0], price, "disaggregated"))
    notes = ["each row searched as --disaggregated searches, the KV transport held; across nodes the pools span "
             "two nodes", "prices: " + ("--price-per-gpu-hour" if price_per_gpu_hour is not None else
                                        "the closest real offering of each interconnect (JSON `price`)")]
    return LinkComparison(offering.id, offering.system.node.gpu.id, rows, notes)
