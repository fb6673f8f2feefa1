"""compare, profiles and calibrate fit 80 columns without cutting run ids, size headers or percentages."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rich.table import Table

from linkscope.model.calibration.calibrate import OpFit, Segment
from linkscope.model.calibration.profiles import new_profile
from linkscope.report.calibrate import fit_table, profiles_table
from linkscope.report.compare import busbw_table, compare_runs
from linkscope.results.nccltests.importer import parse_nccl_tests_file

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nccl_tests"


def _render(table: Table) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(table)
    return out.getvalue().splitlines()


def _run(name: str, run_id: str, label: str):  # noqa: ANN202 - (RunInfo, rows)
    from linkscope.results.nccltests.importer import run_info

    parsed = parse_nccl_tests_file(FIXTURES / name)
    info = run_info(parsed, label)
    info.run_id = run_id
    return info, parsed.rows


def test_compare_keeps_ids_headers_and_percentages_whole() -> None:
    runs = [_run("v2.13_all_reduce_h100_2x8.txt", "c66f1262", "a long label that must fold, not push"),
            _run("v2.13_all_reduce_a100_8gpu_oci.txt", "325aa36a", "oci")]
    lines = _render(busbw_table(compare_runs(runs, "all_reduce")))
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "c66f1262" in text and "325aa36a" in text and "…" not in text
    for header in ("8 B", "1M", "64M", "1G", "lat us", "peak"):
        assert header in text
    assert "+147%" in text and "-74%" in text and "lat us@64" in text  # latency at the smallest common size


def test_profiles_and_calibrate_fit_eighty_columns() -> None:
    fit = OpFit("all_reduce", 16, 2, (Segment(126.5, 2.66, 65536.0), Segment(152.9, 37.81, 2.0**24),
                                      Segment(889.0, 342.89, float("inf"))), 0.008, 0.135, 31)
    profile = new_profile("lab-h100", "c66f1262", 16, 2, "nccl-tests", {"all_reduce": fit}, None,
                          "lambda/gpu_8x_h100_sxm5", "")
    for table in (profiles_table([profile, profile]), fit_table({"all_reduce": fit}, "t")):
        lines = _render(table)
        text = "\n".join(lines)
        assert max(len(line) for line in lines) <= 80
        assert "…" not in text
    assert "c66f1262" in "\n".join(_render(profiles_table([profile])))
    assert profile.created_at[:10] in "\n".join(_render(profiles_table([profile])))
    calib = "\n".join(_render(fit_table({"all_reduce": fit}, "t")))
    assert "all_reduce" in calib and "13.5%" in calib and "0.8%" in calib


def test_a_fit_that_misses_its_own_run_is_saved_with_a_warning() -> None:
    from linkscope.report.calibrate import rough_fit_warnings

    rough = OpFit("all_reduce", 2, 1, (Segment(30.0, 1.5, float("inf")),), 8.3, 28.0, 12)
    close = OpFit("all_gather", 2, 1, (Segment(30.0, 1.5, float("inf")),), 0.05, 0.2, 12)
    profile = new_profile("gloo-vm", "r", 2, 1, "gloo", {"all_reduce": rough, "all_gather": close}, None, None, "")
    assert rough_fit_warnings(profile) == [
        "warning: the all_reduce fit misses its own run by 830% (median; max 2800%), so predictions from profile "
        "gloo-vm are rough; measure more sizes or steps, or on a quieter machine"]
