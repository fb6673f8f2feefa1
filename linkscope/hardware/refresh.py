"""`linkscope catalog refresh`: newer prices from SkyPilot's catalog, joined safely and written as an override.

A refreshed price is applied only when it is whole (every row the provider splits it over: GCP's host row plus
its GPU rows), priced for the offering's own GPU count (a rack-priced row never prices a node, nor a node-priced row
a rack), dated by its source file and not older than the price it replaces (an undated price never replaces a dated
one), from a source that ranks at least as high (provider page > maintained dataset > marketplace listing), inside
the plausibility band of its GPU family (on-demand and spot, spot never above on-demand), and not a jump of more
than MAX_STEP from the current price. Everything else is reported: held-back prices with the reason, region
switches, offerings with no row, and source rows that match no offering. The shipped data is never modified:
prices are merged into `prices-skypilot.yaml` in the user's config directory (see hardware.refresh_write).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from linkscope.hardware.git_dates import file_date_at
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.hardware.plausibility import Bands, family_bands
from linkscope.hardware.refresh_rows import CatalogRow
from linkscope.hardware.currency import rates
from linkscope.hardware.refresh_source import MARKETPLACE_CLOUDS, CatalogSource, SourceFile, source_currency

RANKS = {"marketplace": 0, "dataset": 1, "provider": 2}
SPLIT_PRICE_CLOUDS = frozenset({"gcp"})
"""Clouds whose SkyPilot VM row holds only the host part of the price; the GPUs are rows of their own."""
MAX_STEP = 2.0
"""A new price more than this factor above or below the current one is held back for a person to check: real
price changes are smaller (Lambda's H100 $2.49 -> $3.29, AWS's 2025 P5 cut of 45%), while a mis-joined row or a
corrupt field is not."""


def source_kind(o: Offering) -> str:
    """The rank of an offering's price source: stated in the data, else read from the source text."""
    if o.price_source_kind:
        return o.price_source_kind
    text = (o.price_source or "").lower()
    if text.startswith("skypilot catalog"):
        return "marketplace" if any(f"{c}/" in text for c in MARKETPLACE_CLOUDS) else "dataset"
    # Unlabelled prices are ranked highest so that a refresh never overwrites what it cannot classify.
    return "provider"


@dataclass(frozen=True)
class PriceChange:
    """One offering joined to the source: its old and new price, and whether (and why not) it is applied."""

    offering: str
    old_price: float | None
    new_price: float | None
    old_spot: float | None
    new_spot: float | None
    region: str
    rows: str
    """Which source rows make the price (`host + GPU rows` for split prices)."""
    source: str
    as_of: date | None
    kind: str
    held_back: str | None = None
    """Why the new price is not applied; None when it is."""
    region_switch: str | None = None
    old_as_of: str = "undated"
    """The current price's date as the refresh ranked it (`2026-09-20`, `undated (read 2026-12-04)`)."""
    file: SourceFile | None = None
    currency: str = "USD"
    """The currency of the new prices, as the source publishes them."""

    @property
    def changed(self) -> bool:
        return self.old_price != self.new_price or self.old_spot != self.new_spot

    @property
    def applied(self) -> bool:
        return self.held_back is None and self.changed


@dataclass
class RefreshReport:
    """What a refresh found and did."""

    source: CatalogSource
    changes: list[PriceChange] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    """Offerings of the clouds in the source with no (whole) row there, with the reason."""
    unused: dict[str, list[str]] = field(default_factory=dict)
    """Per cloud, the GPU instance types in the source that match no offering."""

    @property
    def blocking(self) -> list[str]:
        """Rejected rows that stop the refresh."""
        return [str(r) for r in self.source.rejected if r.blocking]


def _keys(o: Offering) -> list[str]:
    return [o.skypilot or f"{o.provider}/{o.instance}", *o.skypilot_aliases]


def _in_region(rows: list[CatalogRow], region: str) -> CatalogRow | None:
    """The cheapest row in one region (zones of a region repeat the same on-demand price)."""
    here = [r for r in rows if r.region == region and r.price is not None]
    return min(here, key=lambda r: r.price or 0.0) if here else None


def _whole_price(parts: list[list[CatalogRow]], region: str) -> tuple[float, float | None] | None:
    """The sum of every part in one region, with the spot sum when every part has one; None if a part is missing."""
    picked = [_in_region(rows, region) for rows in parts]
    if any(p is None for p in picked):
        return None
    chosen = [p for p in picked if p is not None]
    spots = [p.spot_price for p in chosen]
    spot = round(sum(s for s in spots if s is not None), 6) if all(s is not None for s in spots) else None
    return round(sum(p.price or 0.0 for p in chosen), 6), spot


def _counts_differ(o: Offering, parts: list[list[CatalogRow]]) -> str | None:
    """Why the rows price another number of GPUs than the offering has (a rack row on a node, a node row on a
    rack); None when every row that states its GPUs states the offering's."""
    gpus = o.system.node.gpus
    stated = sorted({r.gpus for rows in parts for r in rows if r.gpus is not None and r.accelerator})
    if stated and stated != [gpus]:
        return (f"the source rows price {', '.join(map(str, stated))} GPU(s), the offering has {gpus}; "
                "a row is never joined to a unit of another size")
    return None


def _join(o: Offering, by_key: dict[str, list[CatalogRow]],
          versions: dict[str, int | None]) -> tuple[str, list[list[CatalogRow]]] | str:
    """The matched key and every part's rows, or why the offering cannot be joined."""
    matched = [k for k in _keys(o) if k in by_key]
    if not matched:
        return "no row in the source"
    # The newest catalog version wins (a host's own cloud in v8 over its old marketplace listing in v7); among
    # keys of one version, the order the data lists them in.
    key = max(matched, key=lambda k: (versions.get(k.split("/", 1)[0]) or 0, -matched.index(k)))
    cloud = key.split("/", 1)[0]
    host = by_key[key]
    if cloud in SPLIT_PRICE_CLOUDS and not o.skypilot_parts and not any(r.accelerator for r in host):
        return f"{cloud} bills GPUs apart from the VM and the offering names no GPU rows (skypilot_parts)"
    missing = [p for p in o.skypilot_parts if p not in by_key]
    if missing:
        return f"no row for {', '.join(missing)}"
    parts = [host, *(by_key[p] for p in o.skypilot_parts)]
    mismatch = _counts_differ(o, parts)
    return mismatch if mismatch else (key, parts)


def _cheapest(o: Offering, parts: list[list[CatalogRow]]) -> tuple[str, float, float | None] | None:
    """In a listed region when one has every part, else the cheapest region that has."""
    for region in o.regions:
        whole = _whole_price(parts, region)
        if whole is not None:
            return region, whole[0], whole[1]
    found = [(r, *w) for r in sorted({r.region for r in parts[0]}) if (w := _whole_price(parts, r)) is not None]
    return min(found, key=lambda f: f[1]) if found else None


@dataclass
class _Context:
    """What every offering's decision needs: the source, the bands, and the dates of current prices."""

    source: CatalogSource
    bands: Bands
    dated: dict[tuple[str, str], date | None] = field(default_factory=dict)

    def current_date(self, o: Offering) -> tuple[date | None, str]:
        """The current price's date for ranking, and how to print it. A price read from a skypilot-catalog file
        whose commit date was not at hand is dated by that file's last change as of its commit when the source
        is a checkout holding that commit; otherwise it is undated."""
        if o.price_dated:
            return o.price_as_of, str(o.price_as_of)
        checkout = self.source.checkout
        if checkout is not None and o.price_source_file and o.price_source_commit:
            key = (o.price_source_commit, o.price_source_file)
            if key not in self.dated:
                self.dated[key] = file_date_at(checkout, *key)
            when = self.dated[key]
            if when is not None:
                return when, f"{when} (its file's last change as of commit {o.price_source_commit[:8]})"
        read = f" (read {o.price_as_of})" if o.price_as_of else ""
        return None, f"undated{read}"


def _step(old: float | None, new: float) -> str | None:
    if old is None or old <= 0:
        return None
    ratio = new / old
    if ratio > MAX_STEP or ratio < 1 / MAX_STEP:
        return (f"the price would move {max(ratio, 1 / ratio):.2f}x at once ({old:g} -> {new:g}; more than "
                f"{MAX_STEP:g}x); check the source, and set it by hand if it is right")
    return None


def _implausible(o: Offering, price: float, spot: float | None, currency: str, bands: Bands) -> str | None:
    gpus, family = o.system.node.gpus, o.system.node.gpu.family_name
    if spot is not None and spot > price:
        return f"the spot price {spot:g} is above the on-demand price {price:g}"
    to_usd = rates().factor(currency, "USD") if currency != "USD" else 1.0  # the bands are in USD
    for what, value in (("on-demand", price), ("spot", spot)):
        if value is not None:
            outside = bands.check(value * to_usd / gpus, family, o.id, spot=what == "spot")
            if outside:
                return f"the {what} price {outside}"
    return None


def _hold_back(o: Offering, price: float, spot: float | None, file: SourceFile, kind: str, ctx: _Context,
               old_date: date | None) -> str | None:
    if file.commit_date is None:
        return f"the source file is {file.dated_by}"
    currency = source_currency(file.cloud)
    if o.price_per_hour is not None and o.currency != currency:
        return f"the current price is published in {o.currency}; SkyPilot's {file.cloud} rows are {currency}"
    if old_date is not None and old_date > file.commit_date:
        return f"the current price is newer ({old_date} > {file.commit_date})"
    old_kind = source_kind(o)
    if o.price_per_hour is not None and RANKS[old_kind] > RANKS[kind]:
        return f"the current price is from a {old_kind} source, which ranks above a {kind}"
    return _implausible(o, price, spot, currency, ctx.bands) or _step(o.price_per_hour, price)


def _change(o: Offering, key: str, parts: list[list[CatalogRow]], ctx: _Context) -> PriceChange | str:
    picked = _cheapest(o, parts)
    if picked is None:
        return "no region has every part of the price"
    region, price, spot = picked
    file = ctx.source.files[key.split("/", 1)[0]]
    kind = "marketplace" if file.cloud in MARKETPLACE_CLOUDS else "dataset"
    switch = f"{', '.join(o.regions)} -> {region}" if o.regions and region not in o.regions else None
    old_date, old_text = ctx.current_date(o)
    return PriceChange(o.id, o.price_per_hour, price, o.spot_price_per_hour, spot, region,
                       " + ".join([key, *o.skypilot_parts]), file.describe(), file.commit_date, kind,
                       _hold_back(o, price, spot, file, kind, ctx, old_date), switch, old_text, file,
                       source_currency(file.cloud))


def refresh(db: HardwareDB, source: CatalogSource) -> RefreshReport:
    """Join the source onto the offerings; every offering of a cloud in the source is either changed, held back
    with a reason, unchanged, or listed as unmatched."""
    report = RefreshReport(source=source)
    by_key: dict[str, list[CatalogRow]] = {}
    for row in source.rows:
        by_key.setdefault(row.key, []).append(row)
    clouds = set(source.files)
    ctx = _Context(source, family_bands(db.offerings.values()))
    used: set[str] = set()
    versions = {cloud: f.version for cloud, f in source.files.items()}
    for o in sorted(db.offerings.values(), key=lambda o: o.id):
        if not any(k.split("/", 1)[0] in clouds for k in _keys(o)):
            continue
        joined = _join(o, by_key, versions)
        if isinstance(joined, str):
            report.unmatched.append(f"{o.id} ({joined})")
            continue
        key, parts = joined
        used.update(k for k in _keys(o) if k in by_key)
        used.update(o.skypilot_parts)
        change = _change(o, key, parts, ctx)
        if isinstance(change, str):
            report.unmatched.append(f"{o.id} ({change})")
        else:
            report.changes.append(change)
    for cloud in sorted(clouds):
        names = sorted({r.instance or r.key.split("/", 1)[1] for r in source.rows
                        if r.cloud == cloud and r.accelerator and r.key not in used})
        if names:
            report.unused[cloud] = names
    return report


def known_clouds(db: HardwareDB) -> set[str]:
    """SkyPilot clouds that can match an offering: providers and the clouds of every SkyPilot key."""
    clouds = {o.provider for o in db.offerings.values()}
    for o in db.offerings.values():
        clouds.update(k.split("/", 1)[0] for k in (*_keys(o), *o.skypilot_parts))
    return clouds
