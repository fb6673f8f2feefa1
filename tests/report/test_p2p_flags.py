"""A bidirectional figure below one direction alone is flagged wherever it is printed, never shown as a link's."""

from __future__ import annotations

from rich.console import Console

from linkscope.report.runs import BI_FLAG_NOTE, matrix_table, pairs_table
from linkscope.results.records import PairRow, bi_below_one_way


def _rows(bi: float) -> list[PairRow]:
    return [PairRow(0, 1, 1 << 20, 10.0, bi, 5.0), PairRow(1, 0, 1 << 20, 12.0, bi, 5.0)]


def _text(renderable: object) -> str:
    console = Console(width=120, record=True)
    console.print(renderable)
    return console.export_text()


def test_bidirectional_below_one_direction_is_flagged() -> None:
    assert bi_below_one_way(_rows(11.0)) == {(0, 1), (1, 0)}  # below the 12 GB/s of 1 -> 0
    assert bi_below_one_way(_rows(20.0)) == set()
    shown = _text(pairs_table(_rows(11.0)))
    assert "11.00!" in shown and BI_FLAG_NOTE.split(":")[0] in " ".join(shown.split())
    assert "!" not in _text(pairs_table(_rows(20.0)))
    assert "11.00!" in _text(matrix_table([[None, 11.0], [11.0, None]], 2, {(0, 1), (1, 0)}))
