"""`linkscope catalog refresh`: newer prices from SkyPilot's catalog CSVs, written as an override the loader applies.

SkyPilot's catalog (github.com/skypilot-org/skypilot-catalog) keeps one `vms.csv` per cloud under
`catalogs/v<N>/<cloud>/`, with columns InstanceType, AcceleratorName, AcceleratorCount, Price, Region, SpotPrice.
A row joins an offering when `<cloud>/<InstanceType>` equals the offering's `skypilot` key, or its
`provider/instance`. Prices are per node-hour in USD, as linkscope's are. The shipped data is never modified: the
new prices go to `prices-skypilot.yaml` in the user's config directory, which the loader reads after it.
"""

from __future__ import annotations

import csv
import io
import os
import urllib.request
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import USER_DIR_ENV, HardwareDB
from linkscope.hardware.offering import Offering

OVERRIDE_FILE = "prices-skypilot.yaml"


class _NoAliasDumper(yaml.SafeDumper):
    """Writes repeated values (the same date object) in full instead of as YAML anchors."""

    def ignore_aliases(self, data: object) -> bool:
        return True


@dataclass(frozen=True)
class CatalogRow:
    """One SkyPilot catalog row that carries a price."""

    cloud: str
    instance: str
    region: str
    price: float | None
    spot_price: float | None

    @property
    def key(self) -> str:
        return f"{self.cloud}/{self.instance}"


@dataclass(frozen=True)
class PriceChange:
    """The refreshed price of one offering."""

    offering: str
    old_price: float | None
    new_price: float | None
    old_spot: float | None
    new_spot: float | None
    region: str

    @property
    def changed(self) -> bool:
        return self.old_price != self.new_price or self.old_spot != self.new_spot


@dataclass
class RefreshReport:
    """What a refresh found: matched prices, offerings it could not match, and where it wrote them."""

    source: str
    as_of: date
    changes: list[PriceChange] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    """Offerings of the clouds in the source with no row there."""
    rows: int = 0
    written: Path | None = None


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def parse_csv(text: str, cloud: str, origin: str) -> list[CatalogRow]:
    """Rows of one `vms.csv`; rows without an instance type or any price are dropped."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "InstanceType" not in reader.fieldnames or "Price" not in reader.fieldnames:
        raise DataError(origin, "not a SkyPilot vms.csv (needs columns InstanceType and Price)")
    rows = []
    for raw in reader:
        instance = (raw.get("InstanceType") or "").strip()
        price, spot = _float(raw.get("Price")), _float(raw.get("SpotPrice"))
        if instance and (price is not None or spot is not None):
            rows.append(CatalogRow(cloud, instance, (raw.get("Region") or "").strip(), price, spot))
    return rows


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(str(path), f"cannot read the catalog file ({exc})") from None


def _cloud_of(path: str) -> str:
    """`catalogs/v7/aws/vms.csv` -> `aws`: the directory holding the file."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    return parts[-2].lower() if len(parts) >= 2 else "unknown"


def read_catalog(source: str, cloud: str | None = None) -> list[CatalogRow]:
    """Every priced row under a directory laid out like skypilot-catalog, or of one CSV file or URL."""
    if source.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(source, timeout=60) as response:  # user-given http(s) URL
                text = response.read().decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"cannot download {source} ({exc})", field="from") from None
        return parse_csv(text, cloud or _cloud_of(source), source)
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(path.rglob("vms.csv"))
        if not files:
            raise UserError(f"no */vms.csv under {path}", field="from")
        # With several schema versions (catalogs/v6, v7), the newest one wins for each cloud.
        newest: dict[str, Path] = {}
        for f in files:
            c = f.parent.name.lower()
            if c not in newest or f.parent.parent.name > newest[c].parent.parent.name:
                newest[c] = f
        return [row for c, f in sorted(newest.items()) for row in parse_csv(_read(f), c, str(f))]
    if path.is_file():
        return parse_csv(_read(path), cloud or _cloud_of(str(path.resolve())), str(path))
    raise UserError(f"{source} is neither a directory, a CSV file nor an http(s) URL", field="from")


def _key(o: Offering) -> str:
    return o.skypilot or f"{o.provider}/{o.instance}"


def _pick(o: Offering, rows: list[CatalogRow]) -> CatalogRow:
    """The row in the offering's first listed region that has one, else the cheapest on-demand row."""
    for region in o.regions:
        for row in rows:
            if row.region == region:
                return row
    return min(rows, key=lambda r: (r.price is None, r.price or 0.0, r.region))


def refresh(db: HardwareDB, rows: list[CatalogRow], source: str, as_of: date | None = None) -> RefreshReport:
    """Join catalog rows onto the offerings; the report lists every matched price and every unmatched offering."""
    report = RefreshReport(source=source, as_of=as_of or date.today(), rows=len(rows))
    by_key: dict[str, list[CatalogRow]] = {}
    for row in rows:
        by_key.setdefault(row.key, []).append(row)
    clouds = {row.cloud for row in rows}
    for o in sorted(db.offerings.values(), key=lambda o: o.id):
        key = _key(o)
        matched = by_key.get(key)
        if not matched:
            if key.split("/", 1)[0] in clouds:
                report.unmatched.append(o.id)
            continue
        row = _pick(o, matched)
        report.changes.append(PriceChange(o.id, o.price_per_hour, row.price, o.spot_price_per_hour, row.spot_price,
                                          row.region))
    return report


def override_dir() -> Path:
    """$LINKSCOPE_CONFIG_DIR, else the platform's config directory for linkscope."""
    configured = os.environ.get(USER_DIR_ENV)
    if configured:
        return Path(configured)
    from platformdirs import user_config_dir

    return Path(user_config_dir("linkscope"))


def write_overrides(report: RefreshReport, directory: Path | None = None) -> Path:
    """Write the matched prices as a `price_overrides` file the loader applies over the shipped data."""
    directory = directory or override_dir()
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for c in report.changes:
        if c.new_price is None and c.new_spot is None:
            continue
        entry: dict[str, object] = {"offering": c.offering}
        if c.new_price is not None:
            entry["price_per_hour"] = c.new_price
        if c.new_spot is not None:
            entry["spot_price_per_hour"] = c.new_spot
        entry["price_as_of"] = report.as_of
        entry["price_source"] = f"SkyPilot catalog {report.source} ({c.region or 'no region'}, read {report.as_of})"
        if c.region:
            entry["regions"] = [c.region]
        entries.append(entry)
    path = directory / OVERRIDE_FILE
    header = (f"# Written by `linkscope catalog refresh --from {report.source}` on {report.as_of}.\n"
              "# Applied over linkscope's shipped prices; delete this file to go back to them.\n")
    path.write_text(header + yaml.dump({"price_overrides": entries}, Dumper=_NoAliasDumper, sort_keys=False,
                                              width=120), encoding="utf-8")
    report.written = path
    return path
