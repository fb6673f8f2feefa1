"""A table column as the report tables declare it: its heading and how its cells are justified."""

from __future__ import annotations

from rich.console import JustifyMethod

Column = tuple[str, JustifyMethod]
"""(heading, "left" | "right" | "center" ...), so a misspelt justification is a type error, not a rich error."""
