"""How an offering's nodes are booked where its NVLink domain spans nodes (GB200/GB300 NVL72 trays, UltraServers).

A provider that sells whole domains (an UltraServer, a rack of 18 trays) is paid for whole domains, however few of
their nodes a job runs on. Nodes booked one by one (VMs of a shared rack) share NVLink only if the provider puts
them in one domain, which the booking does not promise: such a plan is priced with NVLink inside each node alone.
Where it is unknown which the provider does, both plans are tried and the better is kept, saying which it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from linkscope.hardware.offering import Offering
from linkscope.hardware.system import System

WHOLE = "whole-domains"
NODES = "nodes"


@dataclass(frozen=True)
class Booking:
    """One way to book an offering: the System its jobs run on and whether nodes are paid in whole domains."""

    kind: str
    """WHOLE (whole NVLink domains), NODES (nodes one by one), or "" where the domain is inside a node."""
    system: System
    confirmed: bool = True
    """False where the offering does not say that a booking gets whole domains."""

    def booked_nodes(self, nodes: int) -> int:
        """Nodes paid for to run on `nodes`: whole domains around them, else the nodes themselves."""
        if self.kind != WHOLE:
            return nodes
        domains, _ = self.system.with_nodes(nodes).domain_split()
        return domains * self.system.nodes_per_domain

    def fleet_nodes(self, nodes: int) -> int:
        """Nodes paid for a serving fleet that needs `nodes` nodes: whole domains where they are booked whole."""
        if self.kind != WHOLE:
            return nodes
        per_domain = self.system.nodes_per_domain
        return -(-nodes // per_domain) * per_domain

    def note(self, nodes: int) -> str | None:
        """What a plan on `nodes` nodes books and why, for the answer; None where there is nothing to say."""
        s = self.system
        if self.kind == WHOLE:
            booked = self.booked_nodes(nodes)
            domains = booked // s.nodes_per_domain
            text = (f"books {domains} whole {s.nvlink_domain_gpus}-GPU NVLink domain{'s' if domains > 1 else ''} "
                    f"({booked} nodes) so that groups span nodes over NVLink; runs on {nodes}")
            return text + ("" if self.confirmed else " (that a booking gets whole domains is unconfirmed)")
        if self.kind == NODES:
            return (f"nodes booked one by one may not share an NVLink domain: priced with NVLink inside each "
                    f"{s.gpus_per_node}-GPU node only")
        return None


def bookings(offering: Offering) -> list[Booking]:
    """The bookings to price for an offering: one, or both where it is unknown whether whole domains are sold."""
    system = offering.system
    if not system.domain_spans_nodes:
        return [Booking("", system)]
    whole = offering.books_whole_domain
    if whole is True:
        return [Booking(WHOLE, system)]
    nodes_alone = Booking(NODES, node_by_node(system))
    return [nodes_alone] if whole is False else [nodes_alone, Booking(WHOLE, system, confirmed=False)]


def serving_booking(offering: Offering) -> Booking:
    """How a serving fleet books the offering: whole domains where that may be possible (so a replica may span
    nodes over NVLink), else nodes one by one."""
    options = bookings(offering)
    return next((b for b in options if b.kind == WHOLE), options[0])


def node_by_node(system: System) -> System:
    """The System as nodes booked one by one: its NVLink domain is the node's own."""
    node = system.node
    return replace(system, node=replace(node, scale_up=replace(node.scale_up, domain_size=node.gpus)))
