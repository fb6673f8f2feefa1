"""`linkscope catalog refresh`: newer prices from SkyPilot's catalog, joined safely and written as an override.

A refreshed price is applied only when it is whole (every row the provider splits it over: GCP's host row plus
its GPU rows), dated by the source commit and not older than the price it replaces, from a source that ranks at
least as high (provider page > maintained dataset > marketplace listing), and inside the plausibility band of its
GPU family. Everything else is reported: held-back prices with the reason, region switches, offerings with no
row, and source rows that match no offering. The shipped data is never modified: prices go to
`prices-skypilot.yaml` in the user's config directory, written atomically, which the loader reads after it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml
from pydantic import ValidationError

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import USER_DIR_ENV, HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.hardware.plausibility import family_medians, implausible
from linkscope.hardware.refresh_source import MARKETPLACE_CLOUDS, CatalogRow, CatalogSource
from linkscope.hardware.schema import PriceOverride

OVERRIDE_FILE = "prices-skypilot.yaml"
RANKS = {"marketplace": 0, "dataset": 1, "provider": 2}
SPLIT_PRICE_CLOUDS = frozenset({"gcp"})
"""Clouds whose SkyPilot VM row holds only the host part of the price; the GPUs are rows of their own."""


class _NoAliasDumper(yaml.SafeDumper):
    """Writes repeated values (the same date object) in full instead of as YAML anchors."""

    def ignore_aliases(self, data: object) -> bool:
        return True


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
    written: Path | None = None

    @property
    def blocking(self) -> list[str]:
        """Rejected rows that stop the refresh."""
        return [str(r) for r in self.source.rejected if r.blocking]


def _keys(o: Offering) -> list[str]:
    return [o.skypilot or f"{o.provider}/{o.instance}", *o.skypilot_aliases]


def _in_region(rows: list[CatalogRow], region: str) -> CatalogRow | None:
    """The cheapest row in one region (zones of a region repeat the same price)."""
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
    return key, [host, *(by_key[p] for p in o.skypilot_parts)]


def _cheapest(o: Offering, parts: list[list[CatalogRow]]) -> tuple[str, float, float | None] | None:
    """In a listed region when one has every part, else the cheapest region that has."""
    for region in o.regions:
        whole = _whole_price(parts, region)
        if whole is not None:
            return region, whole[0], whole[1]
    found = [(r, *w) for r in sorted({r.region for r in parts[0]}) if (w := _whole_price(parts, r)) is not None]
    return min(found, key=lambda f: f[1]) if found else None


def _hold_back(o: Offering, price: float, as_of: date | None, kind: str, medians: dict[str, float]) -> str | None:
    if as_of is None:
        return "the source has no date (give --as-of, the source commit's date)"
    if o.currency != "USD":
        return f"the current price is published in {o.currency}; SkyPilot's are USD"
    if o.price_as_of is not None and o.price_as_of > as_of:
        return f"the current price is newer ({o.price_as_of} > {as_of})"
    old_kind = source_kind(o)
    if o.price_per_hour is not None and RANKS[old_kind] > RANKS[kind]:
        return f"the current price is from a {old_kind} source, which ranks above a {kind}"
    return implausible(price / o.system.node.gpus, o.system.node.gpu.family_name, medians)


def refresh(db: HardwareDB, source: CatalogSource) -> RefreshReport:
    """Join the source onto the offerings; every offering of a cloud in the source is either changed, held back
    with a reason, unchanged, or listed as unmatched."""
    report = RefreshReport(source=source)
    by_key: dict[str, list[CatalogRow]] = {}
    for row in source.rows:
        by_key.setdefault(row.key, []).append(row)
    clouds = set(source.files)
    medians = family_medians(db.offerings.values())
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
        picked = _cheapest(o, parts)
        if picked is None:
            report.unmatched.append(f"{o.id} (no region has every part of the price)")
            continue
        region, price, spot = picked
        file = source.files[key.split("/", 1)[0]]
        kind = "marketplace" if file.cloud in MARKETPLACE_CLOUDS else "dataset"
        switch = (f"{', '.join(o.regions)} -> {region}" if o.regions and region not in o.regions else None)
        rows = " + ".join([key, *o.skypilot_parts])
        report.changes.append(PriceChange(
            o.id, o.price_per_hour, price, o.spot_price_per_hour, spot, region, rows, file.describe(),
            file.commit_date, kind, _hold_back(o, price, file.commit_date, kind, medians), switch))
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


def override_dir() -> Path:
    """$LINKSCOPE_CONFIG_DIR, else the platform's config directory for linkscope."""
    configured = os.environ.get(USER_DIR_ENV)
    if configured:
        return Path(configured)
    from platformdirs import user_config_dir

    return Path(user_config_dir("linkscope"))


def override_entries(report: RefreshReport) -> list[dict[str, object]]:
    """The applied prices as `price_overrides` entries, each validated as the loader will validate it."""
    entries: list[dict[str, object]] = []
    for c in report.changes:
        if not c.applied or c.as_of is None:
            continue
        entry: dict[str, object] = {"offering": c.offering}
        if c.new_price is not None:
            entry["price_per_hour"] = c.new_price
        if c.new_spot is not None:
            entry["spot_price_per_hour"] = c.new_spot
        entry["price_as_of"] = c.as_of
        entry["price_source"] = f"{c.source}: {c.rows}, {c.region or 'no region'}"
        entry["price_source_kind"] = c.kind
        entry["currency"] = "USD"  # SkyPilot's catalog prices are USD
        if c.region:
            entry["regions"] = [c.region]
        try:
            PriceOverride.model_validate(entry)
        except ValidationError as exc:  # a bug upstream, never a reason to write a file that breaks every command
            raise UserError(f"refusing to write {c.offering}: {exc.errors()[0]['msg']}") from None
        entries.append(entry)
    return entries


def write_overrides(report: RefreshReport, directory: Path | None = None) -> Path:
    """Write the applied prices to the override file atomically: a reader sees the old file or the new one."""
    directory = directory or override_dir()
    if report.blocking:
        raise UserError(f"{len(report.blocking)} rejected row(s) in the source; nothing written")
    entries = override_entries(report)
    header = ("# Written by `linkscope catalog refresh`. Applied over linkscope's shipped prices; "
              "delete this file to go back to them.\n")
    text = header + yaml.dump({"price_overrides": entries}, Dumper=_NoAliasDumper, sort_keys=False, width=120)
    path = directory / OVERRIDE_FILE
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".prices-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror or exc})", field="LINKSCOPE_CONFIG_DIR") from None
    report.written = path
    return path
