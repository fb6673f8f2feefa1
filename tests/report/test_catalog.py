"""The catalog table: every column when wide, only what tells offerings apart when narrow."""

from __future__ import annotations

import io

from rich.console import Console

from linkscope.hardware.loader import load_db
from linkscope.report.catalog import WIDE_COLUMNS, catalog_table


def _render(width: int) -> str:
    offerings = [o for o in load_db(include_user=False).offerings.values() if o.provider == "oci"]
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(catalog_table(offerings, width=width))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_wide_terminal_gets_every_column() -> None:
    text = _render(WIDE_COLUMNS + 20)
    for header in ("offering", "GPU", "$/h", "$/GPU-h", "price date", "multi-node"):
        assert header in text


def test_an_80_column_terminal_drops_columns_instead_of_folding_them_to_letters() -> None:
    text = _render(80)
    assert "price date" not in text and "multi-node" not in text
    assert "$/GPU-h" in text and "oci/BM.GPU.H200.8" in text
    assert all(len(line) <= 80 for line in text.splitlines())
