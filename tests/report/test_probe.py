"""Terminal views of `topo` and `nccl-log`, rendered from the recorded 8x H100 node and NCCL logs."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from linkscope.probe.machine import probe_machine
from linkscope.probe.nccl_findings import Expectations
from linkscope.probe.nccl_log import analyse_nccl_log
from linkscope.report.probe import findings_table, gpu_table, log_summary, matrix_table, nic_table, pair_table
from tests.probe.fixtures import fixture_text, h100_smi_runner, tree_paths


def _render(table: Table) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_topo_tables_show_every_gpu_link_and_nic() -> None:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    gpus = _render(gpu_table(probe))
    assert gpus.count("H100") == 8 and "18/18 x 26.5625 GB/s" in gpus
    assert "17/18 x 26.5625 GB/s" in gpus  # the recorded node has one NVLink down on GPU 3
    assert "NV18" in _render(matrix_table(probe))
    assert "mlx5_0" in _render(nic_table(probe))


def test_nccl_log_views_name_the_fallback_and_its_lines() -> None:
    report = analyse_nccl_log(fixture_text("nccl_2node_roce_no_gdr.log"), Expectations(nvlink=True, ib=True))
    summary = log_summary(report)
    assert f"{report.nranks} ranks" in summary and "NCCL " in summary
    findings = _render(findings_table(report))
    assert all(f.message.split()[0] in findings for f in report.findings)
    pairs = _render(pair_table(report))
    assert "->" in pairs
