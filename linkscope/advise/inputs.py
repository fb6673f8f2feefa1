"""What users type for `advise`: token counts (`300B`, `2e12`), durations (`30d`), GPU ranges (`8..1024`),
money (`50k`), and the defaults chosen when they type nothing.

Every parser raises UserError naming the flag and the value, so the command line prints one line and exits 2.
"""

from __future__ import annotations

import math
import re

from linkscope.advise.objective import DEFAULT_DEADLINE_S, MAX_DEADLINE_S, Limits
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import MAX_BUDGET_USD, MAX_GPUS, MAX_TOKENS

# Suffixes as people write token counts: 300B tokens is 3e11, not 300 bytes.
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_NUMBER = re.compile(r"^([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)$", re.IGNORECASE)
_DURATION_S = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0, "y": 365 * 86400.0}
_DURATION = re.compile(r"^([0-9]*\.?[0-9]+)\s*(s|min|m|h|d|w|y)$", re.IGNORECASE)
_NO_DEADLINE = ("none", "no", "off")

DEFAULT_GPU_RANGE = (8, 1024)


def parse_count(text: str, flag: str) -> float:
    """`2e12`, `300B`, `1.5T`, `500M`, `2,000,000` -> a positive number (K/M/B/T = 1e3/1e6/1e9/1e12)."""
    cleaned = text.strip().replace(",", "").replace("_", "").lstrip("$")
    match = _NUMBER.match(cleaned)
    if not match:
        raise UserError(f"{flag}: cannot read '{text}' (write a number such as 2e12, 300B or 50k)")
    value = float(match.group(1)) * _SUFFIX[match.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{flag}: must be a positive number (got '{text}')")
    if flag == "--tokens" and value > MAX_TOKENS:
        raise UserError(f"--tokens: {text} is more than {MAX_TOKENS:.0e}, far past any training run; is it a typo?")
    return value


def parse_duration_s(text: str, flag: str = "--deadline") -> float:
    """`30d`, `36h`, `90min`, `2w`, `1y`, `3600s` -> seconds. A unit is required: a bare `30` is ambiguous."""
    return _duration(text, flag)[0]


def _duration(text: str, flag: str) -> tuple[float, str]:
    """(seconds, the duration in the unit it was given: `0.0001 s`, `30 d`)."""
    cleaned = text.strip()
    if cleaned.startswith("-") or _is_zero(cleaned):
        raise UserError(f"{flag}: must be longer than zero (got '{text}')")
    match = _DURATION.match(cleaned)
    if not match:
        raise UserError(f"{flag}: cannot read '{text}' (write a number with a unit: s, min, h, d, w or y, e.g. 30d)")
    number, unit = float(match.group(1)), match.group(2).lower()
    seconds = number * _DURATION_S[unit]
    if seconds <= 0:
        raise UserError(f"{flag}: must be longer than zero (got '{text}')")
    return seconds, f"{number:g} {unit}"


def _is_zero(text: str) -> bool:
    try:
        return float(text) == 0.0
    except ValueError:
        return False


def parse_deadline(text: str | None) -> Limits:
    """`--deadline`: None -> the default deadline (marked as such), `none` -> no deadline, else a duration of at
    most MAX_DEADLINE_S."""
    if text is None:
        return Limits(DEFAULT_DEADLINE_S, deadline_is_default=True, deadline_given=f"{DEFAULT_DEADLINE_S / 86400:g} d")
    if text.strip().lower() in _NO_DEADLINE:
        return Limits(None)
    seconds, given = _duration(text, "--deadline")
    if seconds > MAX_DEADLINE_S:
        raise UserError(f"--deadline: '{text}' is longer than {MAX_DEADLINE_S / (365 * 86400):.0f} years; "
                        "write --deadline none for no deadline")
    return Limits(seconds, deadline_given=given)


def parse_money_usd(text: str, flag: str = "--budget") -> float:
    """`50000`, `50k`, `$1.2M` -> USD; negative or zero is an error."""
    if text.strip().startswith("-"):
        raise UserError(f"{flag}: must not be negative (got '{text}')")
    value = parse_count(text, flag)
    if value > MAX_BUDGET_USD:
        raise UserError(f"{flag}: {text[:40]} is more than {MAX_BUDGET_USD:,.0f}, more than any job costs")
    return value


def parse_gpu_range(text: str, flag: str = "--gpus-range") -> tuple[int, int]:
    """`8..1024` -> (8, 1024): whole numbers, at least 1, low <= high."""
    low, sep, high = text.strip().partition("..")
    if not sep or not low.strip().isdigit() or not high.strip().isdigit():
        raise UserError(f"{flag}: cannot read '{text}' (write LOW..HIGH, e.g. 8..1024)")
    if len(high.strip()) > 12:
        raise UserError(f"{flag}: '{text[:40]}' is more than {MAX_GPUS:,} GPUs")
    a, b = int(low), int(high)
    if a < 1 or b < a:
        raise UserError(f"{flag}: need 1 <= LOW <= HIGH (got {a}..{b})")
    if b > MAX_GPUS:
        raise UserError(f"{flag}: {b:,} GPUs is more than the {MAX_GPUS:,} any job could book")
    return a, b


def node_counts_in_range(low_gpus: int, high_gpus: int, gpus_per_node: int) -> list[int]:
    """Power-of-two node counts whose GPU total lies in [low, high] (whole nodes only)."""
    counts, nodes = [], 1
    while nodes * gpus_per_node <= high_gpus:
        if nodes * gpus_per_node >= low_gpus:
            counts.append(nodes)
        nodes *= 2
    return counts
