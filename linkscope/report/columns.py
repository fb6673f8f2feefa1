"""A table column as the report tables declare it: its heading and how its cells are justified."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.table import Table

Column = tuple[str, JustifyMethod]
"""(heading, "left" | "right" | "center" ...), so a misspelt justification is a type error, not a rich error."""


def table_fits(table: Table, width: int) -> bool:
    """Whether `table` at its natural width (every cell on its lines, nothing folded, wrapped or cut) fits in
    `width` columns: ids, money and speeds stay whole only then, so one that does not drops its least important
    column instead."""
    out = io.StringIO()
    Console(width=10_000, file=out, color_system=None, highlight=False).print(table, crop=False)
    text = out.getvalue()
    return all(cell_len(line.rstrip()) <= width for line in text.splitlines())


def fitted(build: Callable[[list[Column]], Table], columns: list[Column], drop_order: Sequence[str],
           width: int) -> Table:
    """`build(columns)`, leaving out the columns named in `drop_order`, first ones first, until it fits `width`
    (never a column not named there: what cannot be dropped folds rather than vanish)."""
    table = build(columns)
    for name in drop_order:
        if table_fits(table, width):
            break
        if any(c[0] == name for c in columns):
            columns = [c for c in columns if c[0] != name]
            table = build(columns)
    return table
