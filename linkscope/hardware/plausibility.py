"""The plausibility band on prices: a price per GPU-hour far from its GPU family's prices is a data error.

One band serves `catalog --check` (shipped data and user overrides) and `catalog refresh` (every new price, on-demand
and spot), so a price that the check would flag can never be written by a refresh.

The band comes from the catalog itself: a family's cheapest and dearest prices, each widened by SLACK, taken over the
family's other offerings (leave one out, so that a wrong price cannot widen the band that judges it). It always
reaches MIN_FACTOR either side of the family's median (a family of three like prices still admits a real discount)
and never beyond MAX_FACTOR. Most families' bands are 3.5x either side of the median; H100's reaches 5x upward only
because hyperscaler on-demand rates (Azure's $12.29/GPU-h) sit that far above marketplace listings.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from linkscope.hardware.currency import in_currency
from linkscope.hardware.offering import Offering

SLACK = 1.25
"""How far beyond the family's cheapest and dearest other prices the band reaches."""
MIN_FACTOR = 3.5
"""Every price within this factor of its family's median is plausible, however alike the family's prices are."""
MAX_FACTOR = 5.0
"""No price further than this from its family's median is plausible: it catches a host-only price (GCP bills the
GPUs apart) or a per-GPU price entered as a node price (8x), and a rack's price joined to one tray (18x)."""
MIN_PRICES = 3
"""Families with fewer priced offerings have no median to trust; their prices are not banded."""
SPOT_DISCOUNT_MAX = 0.9
"""Spot prices reach 90% below on-demand (Azure's ND96asr A100 v4: $3.37/h spot against $27.20/h), so a spot price's
band reaches that much below the on-demand band; above, it ends where the on-demand band ends (and a spot price is
never above its own on-demand price)."""


def usd_per_gpu_hour(o: Offering) -> float | None:
    """The on-demand price per GPU-hour in USD, whatever currency it was published in."""
    return in_currency(o, "USD").price_per_gpu_hour


def usd_spot_per_gpu_hour(o: Offering) -> float | None:
    """The spot price per GPU-hour in USD, None when there is none."""
    spot = in_currency(o, "USD").spot_price_per_hour
    return None if spot is None else spot / o.system.node.gpus


@dataclass(frozen=True)
class Band:
    """One GPU family's plausible prices per GPU-hour (USD)."""

    family: str
    median: float
    low: float
    high: float

    def outside(self, per_gpu_hour: float, spot: bool = False) -> str | None:
        """Why a price per GPU-hour is outside the band (a spot price's reaches lower), or None when inside."""
        low = self.low * (1 - SPOT_DISCOUNT_MAX) if spot else self.low
        if low <= per_gpu_hour <= self.high:
            return None
        what = "spot band" if spot else "band"
        return (f"${per_gpu_hour:.2f}/GPU-h is outside the {self.family} {what} ${low:.2f}..${self.high:.2f} "
                f"(median ${self.median:.2f})")


@dataclass
class Bands:
    """Each family's median and its prices, from which an offering's band is built without that offering."""

    medians: dict[str, float]
    prices: dict[str, list[tuple[float, str]]]
    """Per family, each offering's USD price per GPU-hour and id, cheapest first."""

    def band(self, family: str, leave_out: str | None = None) -> Band | None:
        """The band of `family`, its range taken over every offering but `leave_out`; None for too few prices."""
        median = self.medians.get(family)
        if median is None:
            return None
        others = [p for p, oid in self.prices[family] if oid != leave_out] or [median]
        low = max(median / MAX_FACTOR, min(others[0] / SLACK, median / MIN_FACTOR))
        high = min(median * MAX_FACTOR, max(others[-1] * SLACK, median * MIN_FACTOR))
        return Band(family, median, low, high)

    def check(self, per_gpu_hour: float, family: str, leave_out: str | None = None, spot: bool = False) -> str | None:
        """Why a price is implausible for `family`, or None when it is plausible (or the family has no band)."""
        band = self.band(family, leave_out)
        return band.outside(per_gpu_hour, spot) if band else None


def family_bands(offerings: Iterable[Offering]) -> Bands:
    """The bands of every GPU family with at least MIN_PRICES priced offerings, from their on-demand USD prices."""
    prices: dict[str, list[tuple[float, str]]] = {}
    for o in offerings:
        per_gpu = usd_per_gpu_hour(o)
        if per_gpu is not None and per_gpu > 0 and math.isfinite(per_gpu):
            prices.setdefault(o.system.node.gpu.family_name, []).append((per_gpu, o.id))
    medians = {f: statistics.median(p for p, _ in ps) for f, ps in prices.items() if len(ps) >= MIN_PRICES}
    return Bands(medians, {f: sorted(prices[f]) for f in medians})
