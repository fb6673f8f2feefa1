"""The plausibility band on prices: a price per GPU-hour far from its GPU family's median is a data error.

One band serves `catalog --check` (shipped data and user overrides) and `catalog refresh` (every new price), so a
price that the check would flag can never be written by a refresh.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from linkscope.hardware.currency import in_currency
from linkscope.hardware.offering import Offering

BAND_FACTOR = 5.0
"""A price per GPU-hour more than this factor above or below its family's median is implausible. Wide enough for
on-demand hyperscaler prices next to marketplace listings of the same GPU (about 4x apart in the shipped data),
narrow enough to catch a host-only price or a per-GPU price entered as a node price (8x)."""
MIN_PRICES = 3
"""Families with fewer priced offerings have no median to trust; their prices are not banded."""


def usd_per_gpu_hour(o: Offering) -> float | None:
    """The on-demand price per GPU-hour in USD, whatever currency it was published in."""
    return in_currency(o, "USD").price_per_gpu_hour


def family_medians(offerings: Iterable[Offering]) -> dict[str, float]:
    """Median on-demand USD price per GPU-hour of each GPU family with at least MIN_PRICES priced offerings."""
    prices: dict[str, list[float]] = {}
    for o in offerings:
        per_gpu = usd_per_gpu_hour(o)
        if per_gpu is not None:
            prices.setdefault(o.system.node.gpu.family_name, []).append(per_gpu)
    return {family: statistics.median(p) for family, p in prices.items() if len(p) >= MIN_PRICES}


def implausible(per_gpu_hour: float, family: str, medians: dict[str, float]) -> str | None:
    """Why a price per GPU-hour is outside its family's band, or None when it is inside (or there is no band)."""
    median = medians.get(family)
    if median is None:
        return None
    if per_gpu_hour > median * BAND_FACTOR or per_gpu_hour < median / BAND_FACTOR:
        return (f"${per_gpu_hour:.2f}/GPU-h is outside {BAND_FACTOR:g}x of the {family} median "
                f"${median:.2f}/GPU-h")
    return None
