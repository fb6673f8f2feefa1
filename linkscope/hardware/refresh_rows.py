"""The rows of one SkyPilot `vms.csv`, each validated and accounted for: used, or rejected with its line and why.

A row names an instance type (InstanceType) or, on clouds that bill GPUs apart from the VM (GCP), only an
accelerator (AcceleratorName, AcceleratorCount); Price and SpotPrice are USD per hour. Nothing is dropped in
silence: a malformed row (a price that is not a plain number, a ragged row, a control character in a name) is a
blocking rejection that stops the refresh; a row with no price, a repeated row and a spot price above its on-demand
price are non-blocking and listed with their line numbers.
"""

from __future__ import annotations

import csv
import io
import math
import re
import unicodedata
from dataclasses import dataclass, field

from linkscope.hardware.errors import DataError
from linkscope.hardware.limits import MAX_PRICE_PER_HOUR

MAX_ACCELERATORS = 4096
"""More accelerators than any one instance type lists."""
MAX_NAME_CHARS = 200
"""Longer than any instance type, region or zone name; a longer field is a corrupt row."""
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A plain decimal number: no digit separators (`1_9.2`, which float() reads as 19.2), no hex, no other scripts'
digits (float() reads Arabic-Indic digits too)."""
_NOT_FINITE = frozenset({"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "+nan", "-nan"})
_NAMED_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Region", "AvailabilityZone")
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Control, format (bidirectional overrides, zero-width), surrogate, private-use, unassigned and line/paragraph
separator characters: none belongs in a name, and a newline in a region would print as extra lines of the diff."""


@dataclass(frozen=True)
class CatalogRow:
    """One priced row of a SkyPilot catalog file."""

    cloud: str
    instance: str
    accelerator: str
    accelerator_count: str
    region: str
    price: float | None
    spot_price: float | None
    line: int
    zone: str = ""

    @property
    def key(self) -> str:
        """`cloud/InstanceType`, or `cloud/gpu:NAME:COUNT` for a GPU-only row."""
        if self.instance:
            return f"{self.cloud}/{self.instance}"
        return f"{self.cloud}/gpu:{self.accelerator}:{self.accelerator_count}"

    @property
    def gpus(self) -> int | None:
        """The GPUs the row's price is for, when the row states it."""
        return int(self.accelerator_count) if self.accelerator_count.isdigit() else None


@dataclass(frozen=True)
class RejectedRow:
    """A row (or part of one) that is not used, where it is and why."""

    origin: str
    line: int
    reason: str
    blocking: bool = True
    """A blocking rejection (a malformed or impossible value) stops the refresh; the others only skip a row."""
    kind: str = ""
    """For non-blocking rejections, a short label that groups them in the report (`no price`)."""

    def __str__(self) -> str:
        return f"{self.origin}:{self.line}: {self.reason}"


@dataclass
class ParsedRows:
    """The usable rows of one file and every row that is not used."""

    rows: list[CatalogRow] = field(default_factory=list)
    rejected: list[RejectedRow] = field(default_factory=list)


def parse_number(raw: str) -> float | str:
    """A plain decimal number, or why the text is not one (`'1_9.2' is not a number`)."""
    if raw.lower() in _NOT_FINITE:
        return f"{raw[:40]} is not a finite number"
    if not _NUMBER.fullmatch(raw):
        return f"{raw[:40]!r} is not a number"  # repr: a newline in the field cannot print as a line of its own
    value = float(raw)
    if not math.isfinite(value):
        return f"{raw[:40]} is not a finite number"
    return value


def _price(text: str, column: str, origin: str, line: int) -> tuple[float | None, RejectedRow | None]:
    raw = text.strip()
    if not raw:
        return None, None
    value = parse_number(raw)
    if isinstance(value, str):
        return None, RejectedRow(origin, line, f"{column} {value}")
    if value < 0:
        return None, RejectedRow(origin, line, f"{column} {raw[:40]} is negative")
    if value == 0:
        return None, RejectedRow(origin, line, f"{column} is 0 (not a price; row skipped)", blocking=False,
                                 kind=f"{column} 0")
    if value > MAX_PRICE_PER_HOUR:
        return None, RejectedRow(origin, line, f"{column} {raw[:40]} is above ${MAX_PRICE_PER_HOUR:,.0f}/h")
    return value, None


def bad_text(text: str, max_chars: int | None = MAX_NAME_CHARS) -> str | None:
    """Why a text is not one printable line (the first offending character), or None when it is."""
    for ch in text:
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            return f"contains a control or invisible character (U+{ord(ch):04X})"
    if max_chars is not None and len(text) > max_chars:
        return f"is {len(text)} characters long (at most {max_chars})"
    return None


def _names(values: dict[str, str], origin: str, line: int) -> RejectedRow | None:
    for column in _NAMED_COLUMNS:
        problem = bad_text(values.get(column, ""))
        if problem:
            return RejectedRow(origin, line, f"{column} {problem}")
    count = values.get("AcceleratorCount", "").strip()
    if count:
        number = parse_number(count)
        if isinstance(number, str) or number < 0:
            return RejectedRow(origin, line, f"AcceleratorCount {count[:40]!r} is not a number of GPUs")
        if number != int(number):  # a slice of a GPU (Azure's NVads A10 v5 rent a sixth of one): real, not ours
            return RejectedRow(origin, line, f"AcceleratorCount {count[:40]} is a fraction of a GPU (row skipped)",
                               blocking=False, kind="fraction of a GPU")
    return None


def _row(values: dict[str, str], cloud: str, origin: str, line: int, out: ParsedRows) -> None:
    """Validate one row's fields; a usable row is added to `out.rows`, anything else to `out.rejected`."""
    bad_name = _names(values, origin, line)
    if bad_name is not None:
        out.rejected.append(bad_name)
        return
    price, bad_price = _price(values.get("Price", ""), "Price", origin, line)
    spot, bad_spot = _price(values.get("SpotPrice", ""), "SpotPrice", origin, line)
    out.rejected += [r for r in (bad_price, bad_spot) if r is not None]
    if any(r is not None and r.blocking for r in (bad_price, bad_spot)):
        return
    instance, accelerator = values.get("InstanceType", "").strip(), values.get("AcceleratorName", "").strip()
    if not (instance or accelerator):
        return  # neither an instance type nor a GPU: nothing linkscope can join
    if price is not None and spot is not None and spot > price:
        out.rejected.append(RejectedRow(origin, line, f"SpotPrice {spot:g} is above Price {price:g}; the spot price "
                                        "is dropped", blocking=False, kind="spot above on-demand"))
        spot = None
    if price is None and spot is None:
        if bad_price is None and bad_spot is None:
            out.rejected.append(RejectedRow(origin, line, "no Price and no SpotPrice (row skipped)", blocking=False,
                                            kind="no price"))
        return
    count = values.get("AcceleratorCount", "").strip()
    if count:
        # Read as strictly as prices: float() would take `1_6` as 16 and end in OverflowError on `inf`.
        number = parse_number(count)
        if isinstance(number, str) or not number.is_integer() or not 0 <= number <= MAX_ACCELERATORS:
            out.rejected.append(RejectedRow(origin, line, f"AcceleratorCount {count[:40]!r} is not a whole number "
                                            f"from 0 to {MAX_ACCELERATORS}"))
            return
        count = str(int(number))
    out.rows.append(CatalogRow(cloud, instance, accelerator, count, values.get("Region", "").strip(), price, spot,
                               line, values.get("AvailabilityZone", "").strip()))


def _deduplicated(parsed: ParsedRows, origin: str) -> None:
    """One row per instance, region and zone. A repeat at the same prices is dropped; a repeat at other prices is
    a conflict, resolved by keeping the higher on-demand price (a refresh never understates a cost). Both are
    reported with the line of the row they repeat."""
    first: dict[tuple[str, str, str], CatalogRow] = {}
    for row in parsed.rows:
        where = (row.key, row.region, row.zone)
        seen = first.get(where)
        if seen is None:
            first[where] = row
            continue
        place = f"{row.key} in {row.region or 'no region'}{' ' + row.zone if row.zone else ''}"
        if (seen.price, seen.spot_price) == (row.price, row.spot_price):
            parsed.rejected.append(RejectedRow(origin, row.line, f"repeats line {seen.line} ({place}) at the same "
                                               "prices; ignored", blocking=False, kind="repeated row"))
            continue
        keep = row if (row.price or 0.0) > (seen.price or 0.0) else seen
        parsed.rejected.append(RejectedRow(
            origin, row.line, f"repeats line {seen.line} ({place}) at Price {_text(row.price)} instead of "
            f"{_text(seen.price)}: the higher on-demand price (line {keep.line}) is kept", blocking=False,
            kind="conflicting repeat"))
        first[where] = keep
    parsed.rows = sorted(first.values(), key=lambda r: r.line)


def _text(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def parse_csv(text: str, cloud: str, origin: str) -> ParsedRows:
    """Validate every row of one `vms.csv`; usable rows and rejected rows (with line and reason) both come back."""
    out = ParsedRows()
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in ("InstanceType", "Price") if c not in header]
        if missing:
            raise DataError(origin, f"not a SkyPilot vms.csv (missing column {', '.join(missing)})")
        start = reader.line_num + 1
        for fields in reader:
            line, start = start, reader.line_num + 1  # a quoted field may span lines: report where the row starts
            if not fields:
                continue  # a blank line
            if len(fields) != len(header):
                out.rejected.append(RejectedRow(origin, line, f"{len(fields)} fields where the header has "
                                                f"{len(header)} (a ragged row)"))
                continue
            _row(dict(zip(header, fields)), cloud, origin, line, out)
    except csv.Error as exc:
        raise DataError(origin, f"line {reader.line_num}: not readable as CSV ({exc})") from None
    _deduplicated(out, origin)
    return out
