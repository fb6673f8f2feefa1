"""Pydantic schemas for the hardware data files: the edge where external input is validated.

Every entry carries `source` and `as_of`. Fields use the unit-suffixed names of the rest of linkscope.
Unknown keys are rejected so a misspelt field is reported instead of silently ignored.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from linkscope.hardware.limits import MAX_PRICE_PER_HOUR
from linkscope.hardware.specs import LinkFamily, LinkUnit
from linkscope.hardware.system import split_into_domains

Id = str
PriceSourceKind = Literal["provider", "dataset", "marketplace"]
"""Where a price was read, best first: the provider's own page, a maintained dataset, a marketplace listing."""
PriceDateBasis = Literal["source", "read"]
"""What `price_as_of` is: the source's own date (a page read the day it stated the price, a file's last commit), or
only the day a source of unknown date was read (a stored copy, a file whose commit date was not at hand): no newer
than that, and never ranked above a price dated by its source."""
SKYPILOT_KEY = r"^[a-z0-9-]+/\S+$"
CATALOG_FILE = r"^catalogs/v[0-9]+/[a-z0-9-]+/vms\.csv$"
COMMIT = r"^[0-9a-f]{7,40}$"
"""A git commit, full or abbreviated (git resolves an abbreviation that is unique in the checkout)."""
GIB_PER_GB = 1e9 / 2**30
"""GiB in one decimal gigabyte (10^9 bytes)."""
MAX_COUNT = 10_000_000
"""Upper bound on counts (GPUs, nodes, NICs): far beyond any machine, keeps arithmetic finite and fast."""


class _Strict(BaseModel):
    # allow_inf_nan=False: `.inf` or `.nan` in a rate or price is a typo, never a measurement. defer_build: a
    # validator is built when a file first needs it (a preset needs no offering schema), not on every start.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


class Provenance(_Strict):
    source: str = Field(min_length=1)
    as_of: date

    @field_validator("as_of")
    @classmethod
    def _not_in_the_future(cls, value: date) -> date:
        return past_date(value)


def past_date(value: date) -> date:
    """A fact's date is today or earlier (a day of slack for time zones): `as_of: 2999-01-01` is a typo."""
    if value > date.today() + timedelta(days=1):
        raise ValueError(f"{value} is in the future")
    return value


class GpuEntry(Provenance):
    id: Id = Field(min_length=1)
    family: Id | None = None
    """The product line (`A100` for every A100 board); the id when not given."""
    aliases: list[str] = []
    vendor: Literal["nvidia", "amd"]
    arch: str = Field(min_length=1)
    form_factor: Literal["SXM", "PCIe", "NVL", "OAM", "Superchip"]
    compute_capability: str | None = None
    memory_gb: float | None = Field(default=None, gt=0)
    """The vendor's memory figure, as printed ("288 GB")."""
    memory_gb_unit: Literal["GiB", "GB"] | None = None
    """What the vendor's "GB" is: binary (an "80GB" A100 reports 81,920 MiB) or decimal (a "288 GB" B300 reports
    275,040 MiB, 268.6 GiB)."""
    memory_gib: float | None = Field(default=None, gt=0)
    """Only for a GPU given without the vendor's figure; otherwise derived from memory_gb."""
    hbm_gb_per_s: float = Field(gt=0)
    fp16_dense_tflops: float = Field(gt=0)
    bf16_dense_tflops: float | None = Field(default=None, gt=0)
    fp8_dense_tflops: float | None = Field(default=None, gt=0)
    scale_up_link: Id | None = None
    nvlink_links: int | None = Field(default=None, ge=1, le=MAX_COUNT, strict=True)
    pcie: Id

    @model_validator(mode="after")
    def _one_memory_figure(self) -> GpuEntry:
        if self.memory_gb is not None and self.memory_gb_unit is None:
            raise ValueError("memory_gb needs memory_gb_unit (GiB when the vendor's GB are binary, GB when decimal)")
        if (self.memory_gb is None) == (self.memory_gib is None):
            raise ValueError("give memory_gb with memory_gb_unit (the vendor's figure), or memory_gib, not both")
        return self

    @property
    def derived_memory_gib(self) -> float:
        """Memory in GiB: the vendor's figure converted by what its "GB" means."""
        if self.memory_gb is None:
            return self.memory_gib or 0.0
        return self.memory_gb if self.memory_gb_unit == "GiB" else round(self.memory_gb * GIB_PER_GB, 2)


class LinkEntry(Provenance):
    id: Id = Field(min_length=1)
    name: str = ""
    family: LinkFamily
    generation: str
    unit: LinkUnit
    bw_gb_per_s: float | None = Field(default=None, gt=0)
    per_link_gb_per_s: float | None = Field(default=None, gt=0)
    links_per_gpu: int | None = Field(default=None, ge=1, le=MAX_COUNT, strict=True)


class ScaleUpEntry(_Strict):
    kind: Literal["nvswitch", "nvlink-mesh", "nvlink-bridge", "xgmi-mesh", "pcie"]
    generation: Id | None = None
    """Link generation id; defaults to the GPU's scale-up link (or its PCIe generation for `pcie`)."""
    bw_gb_per_s: float | None = Field(default=None, gt=0)
    """Per GPU, per direction. Defaults to the link generation's per-GPU (or per-x16) rate."""
    domain_size: int | None = Field(default=None, ge=1, le=MAX_COUNT, strict=True)
    in_network_reduction: Literal["none", "nvls"] = "none"


class ScaleOutEntry(_Strict):
    fabric: Literal["infiniband", "roce", "efa", "tcp", "none"]
    generation: Id | None = None
    nics: int = Field(default=0, ge=0, le=MAX_COUNT, strict=True)
    nic_gbit_per_s: float | None = Field(default=None, gt=0)
    gpudirect_rdma: bool = False
    sharp: bool = False
    oversubscription: float = Field(default=1.0, ge=1.0)
    transport: str | None = None

    @model_validator(mode="after")
    def _nics_match_fabric(self) -> ScaleOutEntry:
        if self.fabric == "none" and self.nics:
            raise ValueError("fabric 'none' cannot have NICs")
        if self.fabric != "none" and self.nics == 0:
            raise ValueError(f"fabric '{self.fabric}' needs at least one NIC (nics)")
        if self.gpudirect_rdma and self.fabric in ("tcp", "none"):
            raise ValueError(f"GPUDirect RDMA is impossible over fabric '{self.fabric}'")
        return self


class NodeEntry(_Strict):
    gpu: str = Field(min_length=1)
    gpus: int = Field(ge=1, le=MAX_COUNT, strict=True)
    scale_up: ScaleUpEntry
    # A factory, not an instance: building one here would build its validator on every start (defer_build).
    scale_out: ScaleOutEntry = Field(default_factory=lambda: ScaleOutEntry(fabric="none"))
    host_pcie: Id | None = None
    cpu_vendor: Literal["intel", "amd", "arm"] | None = None
    cpu_sockets: int = Field(default=2, ge=1, le=MAX_COUNT, strict=True)

    @model_validator(mode="after")
    def _domain_fits_nodes(self) -> NodeEntry:
        """An NVSwitch domain holds whole nodes: the node's GPUs, or several nodes' (GB200 NVL72: 18 trays of 4)."""
        domain = self.scale_up.domain_size
        if self.scale_up.kind != "nvswitch" or domain is None:
            return self
        if domain < self.gpus:
            raise ValueError(f"scale_up.domain_size {domain} is smaller than the node's {self.gpus} GPUs (an "
                             f"NVSwitch domain holds whole nodes)")
        if domain % self.gpus:
            raise ValueError(f"scale_up.domain_size {domain} is not a multiple of the node's {self.gpus} GPUs (an "
                             f"NVLink domain across nodes holds whole nodes)")
        return self

    def spans_nodes(self) -> bool:
        """The NVSwitch domain joins several nodes."""
        return self.scale_up.kind == "nvswitch" and (self.scale_up.domain_size or self.gpus) > self.gpus


class SystemEntry(NodeEntry, Provenance):
    """A named System: a preset shipped with linkscope or a user's own System file."""

    id: Id = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    name: str = ""
    description: str = ""
    nodes: int = Field(default=1, ge=1, le=MAX_COUNT, strict=True)

    @model_validator(mode="after")
    def _domain_within_nodes(self) -> SystemEntry:
        """Nodes given with a domain across nodes: the domain is no larger than those GPUs, which fill whole
        domains evenly."""
        if "nodes" not in self.model_fields_set or not self.spans_nodes():
            return self
        domain, gpus = self.scale_up.domain_size or self.gpus, self.nodes * self.gpus
        if domain > gpus:
            raise ValueError(f"scale_up.domain_size {domain} is larger than the {gpus} GPUs of its {self.nodes} "
                             f"node(s)")
        split_into_domains(self.nodes, domain // self.gpus, self.gpus)
        return self


class OfferingEntry(NodeEntry, Provenance):
    """One rentable instance type. Unknown values stay null; `unconfirmed` names values not verified."""

    instance: str = Field(min_length=1)
    provider: str | None = None
    name: str = ""
    price_per_hour: float | None = Field(default=None, gt=0, le=MAX_PRICE_PER_HOUR)
    spot_price_per_hour: float | None = Field(default=None, gt=0, le=MAX_PRICE_PER_HOUR)
    price_as_of: date | None = None
    price_source: str | None = None
    regions: list[str] = []
    multi_node: bool | None = None
    max_nodes: int | None = Field(default=None, ge=1, le=MAX_COUNT, strict=True)
    unconfirmed: list[str] = []
    notes: str = ""
    skypilot: str | None = Field(default=None, pattern=SKYPILOT_KEY)
    """`cloud/InstanceType` of the matching SkyPilot catalog row, when it differs from `provider/instance`."""
    skypilot_aliases: list[str] = []
    """Further keys tried in order when `skypilot` matches nothing: renamed SKUs, hosts that became clouds."""
    skypilot_parts: list[str] = []
    """`cloud/gpu:NAME:COUNT` rows billed on top of the host row (GCP bills GPUs apart from the VM)."""
    price_source_kind: PriceSourceKind | None = None
    """Rank of `price_source`; when absent it is read from the source text (see hardware.refresh)."""
    price_date_basis: PriceDateBasis = "source"
    price_source_file: str | None = Field(default=None, pattern=CATALOG_FILE)
    """The skypilot-catalog file the price was read from, so a refresh from a checkout can date it by its commit."""
    price_source_commit: str | None = Field(default=None, pattern=COMMIT)
    currency: Literal["USD", "CNY", "EUR"] = "USD"
    """The currency the price was published in; it is kept, and converted only for display."""
    books_whole_domain: bool | None = None
    """For an NVLink domain that spans nodes: whether a booking gets whole domains (an UltraServer, a rack sold
    whole: true) or nodes that may share a rack's domain with other tenants (trays or VMs: false); null: unknown."""

    @model_validator(mode="after")
    def _booking_needs_a_domain(self) -> OfferingEntry:
        if self.books_whole_domain is not None and not self.spans_nodes():
            raise ValueError("books_whole_domain applies only to an NVLink domain that spans nodes "
                             "(scale_up.domain_size larger than gpus)")
        domain = self.scale_up.domain_size or self.gpus
        if self.max_nodes is not None and self.spans_nodes() and domain > self.max_nodes * self.gpus:
            raise ValueError(f"scale_up.domain_size {domain} is larger than the {self.max_nodes * self.gpus} GPUs "
                             f"of the {self.max_nodes} node(s) bookable (max_nodes)")
        return self

    @model_validator(mode="after")
    def _keys_are_keys(self) -> OfferingEntry:
        for key in (*self.skypilot_aliases, *self.skypilot_parts):
            if not re.match(SKYPILOT_KEY, key):
                raise ValueError(f"'{key}' is not a cloud/InstanceType key")
        return self

    @field_validator("price_as_of")
    @classmethod
    def _price_not_in_the_future(cls, value: date | None) -> date | None:
        return None if value is None else past_date(value)

    @model_validator(mode="after")
    def _price_has_provenance(self) -> OfferingEntry:
        if self.price_per_hour is not None and self.price_as_of is None:
            raise ValueError("a price needs price_as_of")
        return self


class PriceOverride(_Strict):
    """A newer price for a shipped offering, as written by `linkscope catalog refresh` into the config directory."""

    offering: str = Field(min_length=1, pattern=r"^[^/]+/.+$")
    price_per_hour: float | None = Field(default=None, gt=0, le=MAX_PRICE_PER_HOUR)
    spot_price_per_hour: float | None = Field(default=None, gt=0, le=MAX_PRICE_PER_HOUR)
    price_as_of: date
    price_source: str = Field(min_length=1)
    price_source_kind: PriceSourceKind | None = None
    price_date_basis: PriceDateBasis = "source"
    price_source_file: str | None = Field(default=None, pattern=CATALOG_FILE)
    price_source_commit: str | None = Field(default=None, pattern=COMMIT)
    currency: Literal["USD", "CNY", "EUR"] = "USD"
    regions: list[str] = []
