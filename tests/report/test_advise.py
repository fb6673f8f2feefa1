"""Terminal views of `advise` and `plan`: the number formats, and tables that stay whole at 80 columns."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from linkscope.advise.placement import Parallelism
from linkscope.advise.plan import PlanRequest, make_plan
from linkscope.model.calibration.systems import ResolvedSystem
from linkscope.advise.train import TrainOption
from linkscope.hardware.loader import load_db
from linkscope.model.step.layout import Layout
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import load_model
from linkscope.report.advise import (WIDE_COLUMNS, duration_text, groups_table, layout_text, money_text,
                                     plan_summary, train_table)

PAR = Layout(tp=8, pp=2, dp=4, cp=1, interleave=3, micro_batch=1, recompute="none", zero=1, sequence_parallel=True)


def _render(table: Table, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined]


def _option(unconfirmed: bool) -> TrainOption:
    return TrainOption(offering="lambda/gpu_8x_h100_sxm5", provider="lambda", gpu="H100-SXM5-80GB", gpus_per_node=8,
                       price_per_hour=23.92, price_unconfirmed=unconfirmed, feasible=True, nodes=8, gpus=64,
                       parallelism=PAR, step_time_s=12.3, time_to_train_s=3 * 86400, cost_usd=137_000.0, mfu=0.52,
                       breakdown={"compute_s": 10.0, "tp_comm_s": 2.3}, bottleneck="compute-bound")


def test_number_formats() -> None:
    assert [duration_text(s) for s in (42, 1080, 5.3 * 3600, 12.4 * 86400, 2.1 * 365 * 86400)] == [
        "42 s", "18 min", "5.3 h", "12.4 d", "2.1 y"]
    assert [money_text(v) for v in (12.5, 1234, 335_000, 2_100_000)] == ["$12.50", "$1,234", "$335k", "$2.10M"]
    assert layout_text(PAR) == "tp8 pp2 dp4 v3" and layout_text(None) == "-"


def test_an_unconfirmed_price_is_marked_by_its_flag_not_its_note() -> None:
    table = train_table([_option(True), _option(False)], "t")
    text = _render(table, WIDE_COLUMNS)
    assert "$137k?" in text and text.count("$137k") == 2


def test_the_ranking_stays_whole_at_80_columns() -> None:
    wide = _render(train_table([_option(False)], "t", WIDE_COLUMNS), WIDE_COLUMNS)
    narrow = _render(train_table([_option(False)], "t", 80), 80)
    assert "bottleneck" in wide and "MFU" in wide
    assert "bottleneck" not in narrow and "step" not in narrow and "MFU" not in narrow
    assert "tp8 pp2 dp4 v3" in narrow and "lambda/gpu_8x_h100_sxm5" in narrow
    assert all(len(line) <= 80 for line in narrow.splitlines())


def test_plan_names_the_fabric_and_the_job_it_assumed() -> None:
    system = load_db([]).systems["dgx-h100"]
    job = Job(model=load_model("llama2-13b"), global_batch=256, seq_len=4096)
    result = make_plan(PlanRequest(system=ResolvedSystem.plain(system), nodes=2, par=Parallelism(tp=8, pp=2, dp=1),
                                   job=job))
    groups = _render(groups_table(result), 80)
    assert "infiniband" in groups and "network (" not in groups
    assert "job: global batch 256 x seq len 4096 = 1.0M tokens per step, bf16" in plan_summary(result)
