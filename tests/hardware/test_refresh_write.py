"""A refresh only adds knowledge: overrides merge per offering, and refreshing one cloud keeps another's prices."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import ConfigFileWarning, load_db
from linkscope.hardware.refresh import known_clouds, refresh
from linkscope.hardware.refresh_source import parse_stated, read_catalog
from linkscope.hardware.refresh_write import OVERRIDE_FILE, write_overrides
from linkscope.report.refresh_diff import merge_lines
from tests.cli.helpers import run_cli

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
OFFERINGS = """
offerings:
  - {provider: alpha, instance: h100x1, gpu: H100, gpus: 1, scale_up: {kind: pcie}, price_per_hour: 2.49,
     price_as_of: 2026-01-10, price_source: "SkyPilot catalog v7 alpha/vms.csv", source: t, as_of: 2026-01-10}
  - {provider: alpha, instance: h100x8, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 23.92,
     price_as_of: 2026-01-10, price_source: "SkyPilot catalog v7 alpha/vms.csv", source: t, as_of: 2026-01-10}
  - {provider: beta, instance: h100x8, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 26.0,
     price_as_of: 2026-01-10, price_source: "SkyPilot catalog v7 beta/vms.csv", source: t, as_of: 2026-01-10}
"""


def _tree(root: Path, cloud: str, rows: str) -> Path:
    path = root / cloud / "catalogs" / "v8" / cloud / "vms.csv"
    path.parent.mkdir(parents=True)
    path.write_text(HEADER + rows)
    return root / cloud


@pytest.fixture()
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "offerings.yaml").write_text(OFFERINGS)
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(cfg))
    return cfg


def _apply(tree: Path, cloud: str, when: str, cfg: Path):
    db = load_db()
    report = refresh(db, read_catalog(str(tree), known_clouds(db), stated=parse_stated([f"{cloud}={when}"], None)))
    return write_overrides(report, cfg)


def test_refreshing_cloud_b_keeps_cloud_a_corrections(config: Path, tmp_path: Path) -> None:
    a = _tree(tmp_path, "alpha", "h100x1,H100,1,26,225,3.29,r1,,\nh100x8,H100,8,208,1800,31.92,r1,,\n")
    b = _tree(tmp_path, "beta", "h100x8,H100,8,208,1800,24.0,r1,,\n")
    first = _apply(a, "alpha", "2026-11-30", config)
    assert sorted(c.offering for c, _ in first.added) == ["alpha/h100x1", "alpha/h100x8"]
    second = _apply(b, "beta", "2026-12-01", config)
    assert [c.offering for c, _ in second.added] == ["beta/h100x8"]
    assert sorted(e["offering"] for e in second.kept) == ["alpha/h100x1", "alpha/h100x8"]
    db = load_db()
    assert [db.offerings[i].price_per_hour for i in ("alpha/h100x1", "alpha/h100x8", "beta/h100x8")] == [
        3.29, 31.92, 24.0]
    lines = merge_lines(second)
    assert "added beta/h100x8: 26/h shipped, 2026-01-10 -> 24/h (2026-12-01)" in lines
    assert "kept alpha/h100x1: 3.29/h (2026-11-30)" in lines
    assert lines[-1].endswith(": 1 added, 0 replaced, 2 kept")


def test_a_newer_refresh_replaces_an_entry_and_says_old_and_new(config: Path, tmp_path: Path) -> None:
    _apply(_tree(tmp_path, "alpha", "h100x1,H100,1,26,225,3.29,r1,,\n"), "alpha", "2026-11-30", config)
    newer = _tree(tmp_path / "later", "alpha", "h100x1,H100,1,26,225,2.99,r1,,\n")
    merged = _apply(newer, "alpha", "2026-12-02", config)
    assert merge_lines(merged)[0] == "replaced alpha/h100x1: 3.29/h (2026-11-30) -> 2.99/h (2026-12-02)"
    [entry] = yaml.safe_load((config / OVERRIDE_FILE).read_text())["price_overrides"]
    assert entry["price_per_hour"] == 2.99


def test_the_command_prints_added_replaced_and_kept(config: Path, tmp_path: Path) -> None:
    a = _tree(tmp_path, "alpha", "h100x1,H100,1,26,225,3.29,r1,,\n")
    b = _tree(tmp_path, "beta", "h100x8,H100,8,208,1800,24.0,r1,,\n")
    assert run_cli("catalog", "refresh", "--from", str(a), "--as-of", "alpha=2026-11-30", "--apply").exit_code == 0
    result = run_cli("catalog", "refresh", "--from", str(b), "--as-of", "beta=2026-12-01", "--apply")
    assert result.exit_code == 0, result.output
    assert "added beta/h100x8: 26/h shipped, 2026-01-10 -> 24/h (2026-12-01)" in result.stdout
    assert "kept alpha/h100x1: 3.29/h (2026-11-30)" in result.stdout


def test_a_file_that_cannot_be_merged_into_is_left_alone(config: Path, tmp_path: Path) -> None:
    a = _tree(tmp_path, "alpha", "h100x1,H100,1,26,225,3.29,r1,,\n")
    target = config / OVERRIDE_FILE
    entry = ("  - {offering: beta/h100x8, price_per_hour: 25.0, price_as_of: 2026-11-01, price_source: by hand}\n")
    for text in ("price_overrides: [oops\n", f"price_overrides:\n{entry}{entry}", "something: else\n"):
        target.write_text(text)
        with pytest.raises(UserError, match="cannot merge into"), pytest.warns(ConfigFileWarning):
            _apply(a, "alpha", "2026-11-30", config)  # the loader skips or warns; the writer refuses
        assert target.read_text() == text


def test_a_real_two_cloud_refresh_keeps_the_first_clouds_prices(monkeypatch, tmp_path: Path) -> None:
    """The README's example: two real SkyPilot files (see the fixture's SOURCES.md), one cloud after the other."""
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    tree = Path(__file__).parents[1] / "fixtures" / "catalog" / "skypilot-later" / "catalogs" / "v8"
    first = run_cli("catalog", "refresh", "--from", str(tree / "jarvislabs" / "vms.csv"), "--as-of", "2026-12-07",
                    "--commit", "8f097115", "--apply")
    assert first.exit_code == 0, first.output
    assert first.stdout.rstrip().endswith(": 12 added, 0 replaced, 0 kept")
    second = run_cli("catalog", "refresh", "--from", str(tree / "lium" / "vms.csv"), "--as-of", "2026-12-07",
                     "--commit", "b286816c", "--apply")
    assert second.exit_code == 0, second.output
    assert "kept jarvislabs/8x_H100_192V_1600G: 21.52/h (2026-12-07)" in second.stdout
    assert second.stdout.rstrip().endswith(": 2 added, 0 replaced, 12 kept")
    entries = yaml.safe_load((tmp_path / OVERRIDE_FILE).read_text())["price_overrides"]
    assert {e["price_source_file"] for e in entries} == {"catalogs/v8/jarvislabs/vms.csv", "catalogs/v8/lium/vms.csv"}
    assert run_cli("catalog", "--check").exit_code == 0
