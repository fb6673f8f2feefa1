"""Terminal views of predictions: a scaling study's rows, with and without figures."""

from __future__ import annotations

import io

from rich.console import Console

from linkscope.model.step.layout import Layout
from linkscope.model.step.scaling import ScalingPoint
from linkscope.report.predict import scaling_reasons, scaling_table


def test_a_count_without_figures_shows_none_and_says_why_below() -> None:
    points = [ScalingPoint(1, 8, 128, False, reason="does not fit in memory: needs 145 GiB per GPU at best"),
              ScalingPoint(2, 16, 256, True, 98.7, 10621.0, 0.3, Layout(tp=8, pp=2, dp=1), 2.0, 16.0, 1.0)]
    out = io.StringIO()
    Console(file=out, width=80).print(scaling_table(points, "t", 80))
    first, second = (line for line in out.getvalue().splitlines() if line.lstrip().startswith(("1 ", "2 ")))
    assert "no fit" in first and "s" not in first.replace("no fit", "") and "%" not in first
    assert "98.700 s" in second and "tp8 pp2 dp1" in second and "100.0%" in second
    assert scaling_reasons(points) == ["1 node: does not fit in memory: needs 145 GiB per GPU at best"]
