"""Money as the terminal shows it: amounts computed in USD, shown in the currency chosen with `--currency`.

`advise` ranks in USD (every price converted once, by linkscope.hardware.currency); only what is printed changes
currency, at the same dated ECB rate, and the rate and its date are printed with it. The choice holds for one
`with showing(...)` block, so the tables, headers and sentences of one command agree without each taking it as an
argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date

from linkscope.hardware.currency import check_currency, rates

UNKNOWN = "[dim]unknown[/]"


@dataclass(frozen=True)
class ShownCurrency:
    """The currency amounts are printed in, its units per USD, and the date of that rate (None for USD)."""

    code: str = "USD"
    per_usd: float = 1.0
    as_of: date | None = None
    source: str = ""

    @property
    def symbol(self) -> str:
        """`$` for USD, else the ISO code: `EUR 12.50`, `CNY/Mtok`."""
        return "$" if self.code == "USD" else f"{self.code} "

    def unit(self, per: str) -> str:
        """A column heading: `$/Mtok`, `EUR/Mtok`."""
        return f"{self.symbol.strip()}{per}"

    def note(self) -> str | None:
        """The line that says at which rate amounts were converted; None for USD."""
        if self.code == "USD":
            return None
        return (f"amounts in {self.code}, converted from USD at the ECB reference rate of {self.as_of} "
                f"(1 USD = {self.per_usd:.4f} {self.code})")

    def as_dict(self) -> dict[str, object]:
        """For --json: the code, the factor from the USD amounts in the document, and the rate's date and source."""
        return {"code": self.code, "per_usd": round(self.per_usd, 6),
                "rate_as_of": self.as_of.isoformat() if self.as_of else None, "rate_source": self.source or None}


USD = ShownCurrency()
_SHOWN: ContextVar[ShownCurrency] = ContextVar("shown_currency", default=USD)


def shown_currency(name: str) -> ShownCurrency:
    """`--currency NAME` (USD, CNY, EUR): the currency and the packaged rate that converts USD into it."""
    code = check_currency(name)
    if code == "USD":
        return USD
    r = rates()
    return ShownCurrency(code, r.factor("USD", code), r.as_of, r.source)


@contextmanager
def showing(currency: ShownCurrency) -> Iterator[None]:
    """Print amounts in `currency` inside the block."""
    token = _SHOWN.set(currency)
    try:
        yield
    finally:
        _SHOWN.reset(token)


def current_currency() -> ShownCurrency:
    """The currency amounts are printed in now."""
    return _SHOWN.get()


def to_usd(amount: float) -> float:
    """An amount the user gave in the shown currency (a budget, a price cap), in USD."""
    return amount / current_currency().per_usd


def amount_text(usd: float, digits: int = 2) -> str:
    """A USD amount in the shown currency, as a bare number: `4.25`."""
    return f"{usd * current_currency().per_usd:.{digits}f}"


def money_text(usd: float | None) -> str:
    """`$12.50`, `$1,234`, `$335k`, `$2.10M` (or `EUR 11.68`...), or unknown."""
    if usd is None:
        return UNKNOWN
    value, symbol = usd * current_currency().per_usd, current_currency().symbol
    if value >= 1e6:
        return f"{symbol}{value / 1e6:,.2f}M"
    if value >= 1e5:
        return f"{symbol}{value / 1e3:,.0f}k"
    return f"{symbol}{value:,.0f}" if value >= 100 else f"{symbol}{value:,.2f}"
