"""Currencies of prices and the dated rates that convert them for display (`catalog --currency`).

A price keeps the currency it was published in (the offering's `currency`, USD when not given). Conversion uses
the ECB reference rates in `data/currency.yaml`, whose date is shown with every converted price."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import HardwareDB, read_yaml
from linkscope.hardware.offering import Offering

Currency = Literal["USD", "CNY", "EUR"]
CURRENCIES: tuple[str, ...] = ("USD", "CNY", "EUR")
RATES_FILE = Path(__file__).parent / "data" / "currency.yaml"


class Rates(BaseModel):
    """Units of each currency per 1 EUR, with where and when they were published."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)
    source: str = Field(min_length=1)
    as_of: date
    per_eur: dict[str, float]

    def factor(self, source: str, target: str) -> float:
        """Multiply an amount in `source` by this to get `target`."""
        return self.per_eur[target] / self.per_eur[source]


@lru_cache(maxsize=1)
def rates() -> Rates:
    """The packaged rates, validated (every currency present, every rate finite and positive)."""
    try:
        loaded = Rates.model_validate(read_yaml(RATES_FILE))
    except ValidationError as exc:
        raise DataError(str(RATES_FILE), str(exc.errors()[0]["msg"])) from None
    missing = [c for c in CURRENCIES if c not in loaded.per_eur or not loaded.per_eur[c] > 0]
    if missing:
        raise DataError(str(RATES_FILE), f"no positive rate for {', '.join(missing)}")
    return loaded


def check_currency(name: str) -> str:
    """`--currency`: one of CURRENCIES, case-insensitive."""
    upper = name.strip().upper()
    if upper not in CURRENCIES:
        raise UserError(f"unknown currency {name[:20]!r} (choose from {', '.join(CURRENCIES)})", field="currency")
    return upper


def in_currency(o: Offering, target: str) -> Offering:
    """The offering with its prices in `target`; the source says from which currency, at which dated rate."""
    if o.currency == target or o.price_per_hour is None and o.spot_price_per_hour is None:
        return replace(o, currency=target) if o.price_per_hour is None else o
    r = rates()
    factor = r.factor(o.currency, target)
    note = f" [converted from {o.currency} at the ECB rate of {r.as_of}]"
    return replace(o, currency=target,
                   price_per_hour=None if o.price_per_hour is None else round(o.price_per_hour * factor, 4),
                   spot_price_per_hour=(None if o.spot_price_per_hour is None
                                        else round(o.spot_price_per_hour * factor, 4)),
                   price_source=(o.price_source or "") + note)


def priced_in_usd(db: HardwareDB) -> HardwareDB:
    """The database with every price in USD, for commands that compare prices across offerings (`advise`)."""
    db.offerings = {k: in_currency(o, "USD") for k, o in db.offerings.items()}
    return db
