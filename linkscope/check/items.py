"""One verdict line of `linkscope check` and the thresholds that turn a percentage into PASS/WARN/FAIL."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from linkscope.hardware.errors import UserError

Status = Literal["PASS", "WARN", "FAIL", "SKIP"]


@dataclass(frozen=True)
class Thresholds:
    """PASS at `pass_pct` % of the expectation or more, WARN at `warn_pct` % or more, else FAIL."""

    pass_pct: float = 90.0
    warn_pct: float = 75.0

    def validated(self) -> Thresholds:
        """This object, or UserError when a bound is outside 0-100 or warn is above pass."""
        for flag, value in (("--pass-pct", self.pass_pct), ("--warn-pct", self.warn_pct)):
            if not 0.0 <= value <= 100.0:
                raise UserError(f"{flag} must be between 0 and 100, got {value:g}")
        if self.warn_pct > self.pass_pct:
            raise UserError(f"{self.warn_pct:g} is above the PASS threshold ({self.pass_pct:g})", field="warn_pct")
        return self

    def status(self, pct: float) -> Status:
        """The status of a measurement at `pct` % of its expectation."""
        if pct >= self.pass_pct:
            return "PASS"
        return "WARN" if pct >= self.warn_pct else "FAIL"


@dataclass
class CheckItem:
    """One line: what was measured, what was expected (unit, where from), and for WARN/FAIL the cause and fix
    (for SKIP, the reason)."""

    name: str
    status: Status
    measured: Any
    expected: Any
    unit: str
    source: str
    fix: str = ""
    limits: dict[str, Any] | None = None
    """For bandwidth items: the model's prediction and pass threshold, the published floor where there is one,
    which of them failed the item, and the plateau size."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


def verdict(items: list[CheckItem]) -> Status:
    """FAIL when any item fails, else WARN when any warns, else PASS (SKIPs do not count)."""
    statuses = {item.status for item in items}
    if "FAIL" in statuses:
        return "FAIL"
    return "WARN" if "WARN" in statuses else "PASS"
