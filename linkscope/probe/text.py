"""Small helpers every text parser of the probe shares: problems with line numbers, ANSI stripping, N/A values."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_MISSING = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]",
            "-", "none"}


@dataclass(frozen=True)
class Problem:
    """Something a parser could not read. `line` is 1-based, None when the problem is not tied to a line."""

    source: str
    message: str
    line: int | None = None
    text: str = ""

    def __str__(self) -> str:
        where = f"{self.source} line {self.line}" if self.line is not None else self.source
        quoted = f": {self.text.strip()!r}" if self.text.strip() else ""
        return f"{where}: {self.message}{quoted}"

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"source": self.source, "line": self.line, "message": self.message, "text": self.text.strip()}


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (nvidia-smi underlines the topo -m header with them)."""
    return _ANSI.sub("", text)


def is_missing(value: str | None) -> bool:
    """True for the ways nvidia-smi and sysfs say "no value": N/A, [Not Supported], empty."""
    return value is None or value.strip().lower() in _MISSING


def to_float(value: str | None) -> float | None:
    """A number, or None for N/A-like values and anything that is not a number."""
    if value is None or is_missing(value):
        return None
    try:
        return float(value.strip())
    except ValueError:
        return None


def to_int(value: str | None) -> int | None:
    """An integer, or None for N/A-like values and anything that is not an integer."""
    number = to_float(value)
    if number is None or number != int(number):
        return None
    return int(number)


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line without trailing whitespace) for every line of `text`."""
    return [(i, line.rstrip()) for i, line in enumerate(text.splitlines(), start=1)]
