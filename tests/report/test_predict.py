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


def test_a_tiny_model_shows_real_amounts_not_zeros(tmp_path) -> None:
    from typer.testing import CliRunner

    from linkscope.cli.main import app

    micro = tmp_path / "micro.yaml"
    micro.write_text("id: micro\nlayers: 1\nhidden: 16\nheads: 2\nvocab: 32\nseq_len: 64\nsource: test\n"
                     "as_of: 2026-12-03\n", encoding="utf-8")
    train = CliRunner().invoke(app, ["predict", "train", "-s", "dgx-h100", "-m", str(micro)])
    assert train.exit_code == 0, train.output
    assert "parameters" in train.output and " K " in train.output and "0.0 M" not in train.output
    infer = CliRunner().invoke(app, ["predict", "infer", "-s", "dgx-h100", "-m", str(micro)])
    assert infer.exit_code == 0, infer.output
    assert "GiB (fits)" in infer.output and "0.0 GiB" not in infer.output
