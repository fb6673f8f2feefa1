"""`linkscope catalog refresh`: SkyPilot catalog CSVs joined onto offerings, offline on the checked-in sample."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import load_db
from linkscope.hardware.refresh import OVERRIDE_FILE, parse_csv, read_catalog, refresh, write_overrides
from tests.cli.helpers import run_cli

SAMPLE = Path(__file__).parents[1] / "fixtures" / "catalog" / "skypilot"


def test_reads_a_catalog_tree_and_single_files() -> None:
    rows = read_catalog(str(SAMPLE))
    assert {r.cloud for r in rows} == {"lambda", "shadeform"}
    assert all(r.price or r.spot_price for r in rows)
    one = read_catalog(str(SAMPLE / "catalogs" / "v7" / "lambda" / "vms.csv"))
    assert {r.cloud for r in one} == {"lambda"}
    assert not any(r.instance == "cpu_4x_general" and r.price is None for r in one)


def test_a_file_that_is_not_a_catalog_is_named() -> None:
    with pytest.raises(DataError, match="InstanceType"):
        parse_csv("a,b\n1,2\n", "aws", "x.csv")


def test_refresh_reports_changes_and_unmatched() -> None:
    db = load_db(include_user=False)
    report = refresh(db, read_catalog(str(SAMPLE)), str(SAMPLE), as_of=date(2026, 12, 3))
    by_id = {c.offering: c for c in report.changes}
    a100 = by_id["lambda/gpu_8x_a100"]
    assert (a100.old_price, a100.new_price) == (15.92, 10.32)
    assert a100.changed
    assert by_id["crusoe/A100-80Gx8"].new_price == 13.2  # joined through its `skypilot` key
    assert "lambda/gpu_8x_h100_sxm5" in report.unmatched
    assert not any(o.startswith("aws/") for o in report.unmatched)  # clouds absent from the source are not listed


def test_override_file_is_applied_by_the_loader(tmp_path: Path) -> None:
    db = load_db(include_user=False)
    report = refresh(db, read_catalog(str(SAMPLE)), str(SAMPLE), as_of=date(2026, 12, 3))
    path = write_overrides(report, tmp_path)
    assert path.name == OVERRIDE_FILE
    refreshed = load_db([path], include_user=False).offerings["lambda/gpu_8x_a100"]
    assert refreshed.price_per_hour == 10.32
    assert refreshed.price_as_of == date(2026, 12, 3)
    assert refreshed.price_source and str(SAMPLE) in refreshed.price_source
    assert refreshed.regions == ("europe-central-1",)  # the cheapest row when the offering names no region


def test_refresh_command_writes_to_the_config_dir(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    result = run_cli("catalog", "refresh", "--from", str(SAMPLE))
    assert result.exit_code == 0, result.stderr
    assert "lambda/gpu_8x_a100: 15.92 -> 10.32/h" in result.stdout
    assert "not in the catalog" in result.stdout
    assert (tmp_path / OVERRIDE_FILE).is_file()
    shown = run_cli("catalog", "--json", "--provider", "lambda")
    row = next(r for r in __import__("json").loads(shown.stdout) if r["id"] == "lambda/gpu_8x_a100")
    assert row["price_per_hour"] == 10.32
    assert run_cli("catalog", "--check").exit_code == 0


def test_dry_run_writes_nothing(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    result = run_cli("catalog", "refresh", "--from", str(SAMPLE), "--dry-run")
    assert result.exit_code == 0
    assert not (tmp_path / OVERRIDE_FILE).exists()


def test_unreadable_sources_are_user_errors(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    binary = tmp_path / "vms.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    result = run_cli("catalog", "refresh", "--from", str(binary))
    assert result.exit_code == 2
    missing = run_cli("catalog", "refresh", "--from", str(tmp_path / "nope"))
    assert missing.exit_code == 2
