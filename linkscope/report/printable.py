"""Strings from users and logs made safe to print: control characters (ESC, BEL, C1, bidi overrides) shown escaped,
so that a label, hostname or id from an imported log cannot rewrite the terminal. The one owner of that rule:
the consoles apply it to every string they print, and plain lines call `printable` themselves. JSON output is
left exact (json.dumps escapes control characters itself)."""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline (which lay out text), DEL, C1 controls (0x9b is a one-byte CSI), bidi overrides."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: object) -> str:
    """`str(value)` with every control character shown as `\\xNN` (`\\uNNNN` for bidi controls)."""
    return _UNSAFE.sub(_escaped, str(value))


def printable_line(value: object) -> str:
    """`printable`, and newlines and tabs escaped as well: for one cell or one line that must stay one."""
    return printable(value).replace("\n", "\\n").replace("\t", "\\t")
