"""`linkscope catalog --check`: consistency checks on the hardware data itself, beyond what the schema enforces.

The schema rejects malformed entries; these checks catch entries that are well-formed but wrong: a per-GPU price in
the source text that disagrees with the node price, NIC rates outside the fabric's known generations, undated or
placeholder-dated values, dates in the future, an on-demand or spot price per GPU-hour outside its family's
plausibility band, a spot price above the on-demand price, a text that is not one printable line, an offering with
no price that does not say why. Each finding names the entry and says what is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from collections.abc import Iterable

from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.hardware.plausibility import Bands, family_bands, usd_per_gpu_hour, usd_spot_per_gpu_hour
from linkscope.hardware.refresh_rows import bad_text

STALE_AFTER_DAYS = 90
"""A price older than this draws a warning wherever it is shown or used."""

# Dates that mark "unknown" rather than a real observation.
_PLACEHOLDER_DATES = {date(1970, 1, 1), date(2000, 1, 1), date(2023, 1, 1)}
# Line rates (Gbit/s) per port that each fabric is sold at.
_FABRIC_RATES = {
    "infiniband": {100.0, 200.0, 400.0, 800.0},  # EDR, HDR, NDR, XDR
    "roce": {25.0, 50.0, 100.0, 200.0, 400.0, 800.0},
    "efa": {100.0, 200.0, 400.0},
    "tcp": {10.0, 25.0, 50.0, 100.0, 200.0, 400.0},
}
_PER_GPU = re.compile(r"\$(\d+(?:\.\d+)?)\s*/\s*GPU-h")
_UNCONFIRMABLE = {"instance", "gpu", "gpus", "price_per_hour", "spot_price_per_hour", "price_as_of", "regions",
                  "multi_node", "max_nodes", "cpu_vendor", "cpu_sockets", "host_pcie"}
_SUBFIELDS = {
    "scale_up": {"kind", "generation", "bw_gb_per_s", "domain_size", "in_network_reduction"},
    "scale_out": {"fabric", "generation", "nics", "nic_gbit_per_s", "gpudirect_rdma", "sharp", "oversubscription",
                  "transport"},
}


@dataclass(frozen=True)
class Finding:
    """One problem in the data: which entry, and what is wrong with it."""

    entry: str
    message: str

    def __str__(self) -> str:
        return f"{self.entry}: {self.message}"


def _dates(entry: str, today: date, *named: tuple[str, date | None]) -> list[Finding]:
    out = []
    for name, value in named:
        if value is None:
            continue
        if value in _PLACEHOLDER_DATES:
            out.append(Finding(entry, f"{name} {value} is a placeholder date; give the real date or null"))
        if value > today:
            out.append(Finding(entry, f"{name} {value} is in the future"))
    return out


def _price_findings(o: Offering) -> list[Finding]:
    out = []
    if o.price_per_hour is not None and not o.price_source:
        out.append(Finding(o.id, "price_per_hour has no price_source"))
    if o.price_per_hour is None and not o.price_source:
        out.append(Finding(o.id, "no price and no price_source saying why (e.g. 'no public price: sold by contract')"))
    if o.spot_price_per_hour is not None and o.price_as_of is None:
        out.append(Finding(o.id, "spot_price_per_hour has no price_as_of"))
    if o.price_source_file and not o.price_source_commit:
        out.append(Finding(o.id, "price_source_file has no price_source_commit"))
    if o.price_per_hour is not None and o.price_source:
        per_gpu = o.price_per_hour / o.system.node.gpus
        for m in _PER_GPU.finditer(o.price_source):
            stated = float(m.group(1))
            if abs(stated - per_gpu) > 0.006:
                out.append(Finding(o.id, f"price_source states ${stated}/GPU-h but price_per_hour / gpus = "
                                         f"{o.price_per_hour} / {o.system.node.gpus} = {per_gpu:.4f}"))
    return out


def _band_findings(o: Offering, bands: Bands) -> list[Finding]:
    """On-demand and spot prices inside the family's band (built without this offering), spot under on-demand."""
    out = []
    family = o.system.node.gpu.family_name
    spot, price = o.spot_price_per_hour, o.price_per_hour
    if spot is not None and price is not None and spot > price:
        out.append(Finding(o.id, f"spot_price_per_hour {spot:g} is above price_per_hour {price:g}"))
    for name, value in (("price_per_hour", price), ("spot_price_per_hour", spot)):
        per_gpu = usd_per_gpu_hour(o) if name == "price_per_hour" else usd_spot_per_gpu_hour(o)
        spot_band = name == "spot_price_per_hour"
        outside = bands.check(per_gpu, family, o.id, spot_band) if per_gpu is not None else None
        if outside:
            out.append(Finding(o.id, f"{name} {value:g} is implausible: {outside}"))
    return out


def _text_findings(o: Offering) -> list[Finding]:
    """Every text shown or joined on is one printable line: a newline or a bidirectional override in a region or a
    source would print as lines (or a reordered line) the data does not hold."""
    texts = [("instance", o.instance), ("provider", o.provider), ("name", o.system.name),
             *(("regions", r) for r in o.regions), ("price_source", o.price_source or ""), ("notes", o.notes),
             ("source", o.source), *(("skypilot", k) for k in (o.skypilot or "", *o.skypilot_aliases,
                                                                 *o.skypilot_parts))]
    out = []
    for name, text in texts:
        problem = bad_text(text, None)
        if problem:
            out.append(Finding(o.id, f"{name} {problem}"))
    return out


def _nic_findings(o: Offering, db: HardwareDB) -> list[Finding]:
    so = o.system.node.scale_out
    out = []
    if so.fabric == "none":
        if so.nics or so.nic_gbit_per_s:
            out.append(Finding(o.id, "fabric 'none' but NICs are given"))
        if o.multi_node:
            out.append(Finding(o.id, "multi_node is true but there is no scale-out fabric"))
        return out
    if so.nics <= 0:
        out.append(Finding(o.id, f"fabric '{so.fabric}' has no NICs"))
    rates = _FABRIC_RATES.get(so.fabric)
    if so.nic_gbit_per_s is not None and rates is not None and so.nic_gbit_per_s not in rates:
        out.append(Finding(o.id, f"{so.fabric} NIC rate {so.nic_gbit_per_s:g} Gbit/s is not a known generation "
                                 f"({', '.join(f'{r:g}' for r in sorted(rates))})"))
    link = db.links.get(so.generation or "")
    if link is not None and link.family != so.fabric:
        out.append(Finding(o.id, f"scale_out.generation '{link.id}' is {link.family}, not {so.fabric}"))
    if (link is not None and link.family == "infiniband" and link.gbit_per_s and so.nic_gbit_per_s
            and link.gbit_per_s != so.nic_gbit_per_s):
        out.append(Finding(o.id, f"{link.id} runs at {link.gbit_per_s:g} Gbit/s, not {so.nic_gbit_per_s:g}"))
    return out


def _unconfirmed_findings(o: Offering) -> list[Finding]:
    out = []
    for name in o.unconfirmed:
        head, _, sub = name.partition(".")
        ok = (not sub and head in _UNCONFIRMABLE) or (sub and sub in _SUBFIELDS.get(head, set()))
        if not ok:
            out.append(Finding(o.id, f"unconfirmed names '{name}', which is not a field"))
    return out


def check_db(db: HardwareDB, today: date | None = None) -> list[Finding]:
    """Every finding in the loaded data, GPUs and links first, then offerings in id order."""
    today = today or date.today()
    found: list[Finding] = []
    for g in db.gpus.values():
        found += _dates(f"gpu {g.id}", today, ("as_of", g.as_of))
    for link in db.links.values():
        found += _dates(f"link {link.id}", today, ("as_of", link.as_of))
    for s in db.systems.values():
        found += _dates(f"system {s.id}", today, ("as_of", s.as_of))
    bands = family_bands(db.offerings.values())
    for o in sorted(db.offerings.values(), key=lambda o: o.id):
        found += _dates(o.id, today, ("as_of", o.as_of), ("price_as_of", o.price_as_of))
        found += _price_findings(o)
        found += _band_findings(o, bands)
        found += _text_findings(o)
        found += _nic_findings(o, db)
        found += _unconfirmed_findings(o)
    return found


def stale_prices(offerings: Iterable[Offering], today: date | None = None,
                 days: int = STALE_AFTER_DAYS) -> list[Offering]:
    """Offerings whose price is older than `days`, oldest first."""
    cutoff = (today or date.today()) - timedelta(days=days)
    old = [o for o in offerings if o.price_per_hour is not None and o.price_as_of is not None
           and o.price_as_of < cutoff]
    return sorted(old, key=lambda o: (o.price_as_of, o.id))


def stale_warning(offerings: Iterable[Offering], today: date | None = None) -> str | None:
    """One line naming how many prices are stale and the oldest, or None when none is."""
    old = stale_prices(offerings, today)
    if not old:
        return None
    first = old[0]
    return (f"{len(old)} price(s) older than {STALE_AFTER_DAYS} days (oldest: {first.id}, {first.price_as_of}); "
            "run `linkscope catalog refresh` or check the provider")
