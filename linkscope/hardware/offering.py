"""A rentable instance type: a node (as a System) with a price and where it can be booked."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from linkscope.hardware.system import System


@dataclass(frozen=True)
class Offering:
    """One instance type of one provider. Unknown values are None and are shown as unknown."""

    id: str
    """`provider/instance`, usable wherever a System is asked for."""
    provider: str
    instance: str
    system: System
    price_per_hour: float | None
    """On-demand price per node-hour, in `currency`."""
    spot_price_per_hour: float | None
    price_as_of: date | None
    price_source: str | None
    regions: tuple[str, ...]
    multi_node: bool | None
    """Whether clusters of several nodes can be booked (None: unknown)."""
    unconfirmed: tuple[str, ...]
    """Field names whose values come from a source that does not quite state them."""
    notes: str
    source: str
    as_of: date
    skypilot: str | None = None
    """`cloud/InstanceType` of the matching SkyPilot catalog row when it is not `provider/instance`."""
    skypilot_aliases: tuple[str, ...] = ()
    """Further SkyPilot keys tried in order (renamed SKUs, hosts that became clouds of their own)."""
    skypilot_parts: tuple[str, ...] = ()
    """SkyPilot GPU rows (`cloud/gpu:NAME:COUNT`) billed on top of the host row."""
    price_source_kind: str | None = None
    """`provider`, `dataset` or `marketplace` when stated in the data."""
    currency: str = "USD"
    """The currency of `price_per_hour` and `spot_price_per_hour` (as published)."""
    books_whole_domain: bool | None = None
    """Where the NVLink domain spans nodes: a booking gets whole domains (True), nodes that may share a rack's
    domain with other tenants (False), or unknown (None)."""
    price_date_basis: str = "source"
    """`source`: `price_as_of` is the source's own date; `read`: only the day a source of unknown date was read."""
    price_source_file: str | None = None
    """The skypilot-catalog file (`catalogs/v8/lambda/vms.csv`) the price came from, if it came from one."""
    price_source_commit: str | None = None
    """That file's commit, by which a refresh from a skypilot-catalog checkout dates the price."""

    @property
    def price_dated(self) -> bool:
        """Whether the price carries its source's own date (else it is undated and never outranks a dated one)."""
        return self.price_as_of is not None and self.price_date_basis == "source"

    @property
    def price_per_gpu_hour(self) -> float | None:
        """On-demand price divided by the node's GPUs."""
        if self.price_per_hour is None:
            return None
        return self.price_per_hour / self.system.node.gpus
