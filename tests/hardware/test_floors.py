"""The published health-check floors: what the packaged file holds, and every bad entry refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.floors import FLOORS_FILE, load_floors
from linkscope.hardware.loader import HardwareDB, load_db


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def test_azure_floors_are_the_health_checks_own_figures(db: HardwareDB) -> None:
    floors = load_floors(db)
    h100 = floors.find("azure/Standard_ND96isr_H100_v5", "all_reduce", gpus=8, nodes=1)
    assert h100 is not None and (h100.busbw_gb_per_s, h100.size_bytes, h100.statistic) == (460.0, 16 << 30, "avg")
    expected = {"azure/Standard_ND96isr_H200_v5": (431.0, 16 << 30), "azure/Standard_ND96asr_v4": (228.0, 8 << 30),
                "azure/Standard_ND96amsr_A100_v4": (228.0, 16 << 30),
                "azure/Standard_ND96isr_MI300X_v5": (314.0, 16 << 30)}
    for system, (value, size) in expected.items():
        floor = floors.find(system, "all_reduce", gpus=8)
        assert floor is not None and (floor.busbw_gb_per_s, floor.size_bytes) == (value, size), system
    assert floors.find("azure/Standard_ND96isr_MI300X_v5", "all_reduce", 8).library == "rccl"
    assert "Azure's health-check floor 460 GB/s (avg busbw at 16 GiB)" in h100.describe()


def test_aws_floors_are_advisory_and_only_for_several_nodes(db: HardwareDB) -> None:
    floors = load_floors(db)
    assert floors.find("aws/p5.48xlarge", "all_reduce", gpus=8, nodes=1) is None
    floor = floors.find("aws/p5.48xlarge", "all_reduce", gpus=8, nodes=2)
    assert floor is not None and floor.severity == "warn" and floor.statistic == "max"
    assert floors.find("dgx-h100", "all_reduce", gpus=8) is None  # a preset publishes no floor


def _bad(tmp_path: Path, old: str, new: str) -> Path:
    text = FLOORS_FILE.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "floors.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(("old", "new", "message"), [
    ("busbw_gb_per_s: 460.0", "busbw_gb_per_s: -460.0", "positive, finite"),
    ("busbw_gb_per_s: 460.0", "busbw_gb_per_s: .nan", "positive, finite"),
    ("busbw_gb_per_s: 460.0", "busbw_gb_per_s: .inf", "positive, finite"),
    ("busbw_gb_per_s: 460.0", "busbw: 460.0", "unit-less value 'busbw'"),
    ("busbw_gb_per_s: 460.0", 'busbw_gb_per_s: "460 GB/s"', "a unit belongs in the name"),
    ("system: azure/Standard_ND96isr_H100_v5", "system: azure/Standard_ND96isr_H100_v6", "unknown System id"),
    ("system: azure/Standard_ND96isr_H200_v5", "system: azure/Standard_ND96isr_H100_v5", "duplicate entry"),
    ("size_bytes: 17179869184", "size_bytes: 0", "at least 1"),
    ("statistic: avg", "statistic: median", "must be one of avg, max"),
    ("as_of: 2025-08-20", "as_of: 2999-01-01", "in the future"),
])
def test_a_bad_entry_is_refused_naming_it(tmp_path: Path, db: HardwareDB, old: str, new: str, message: str) -> None:
    with pytest.raises(DataError) as err:
        load_floors(db, _bad(tmp_path, old, new))
    assert message in str(err.value) and "entry 'azure/Standard_ND96isr_H" in str(err.value)


@pytest.mark.parametrize("text", ["", "floors: 3\n", "- a\n", "floors: [1]\n", "\x00\x01binary"])
def test_a_file_that_is_not_a_floors_file_is_one_line(tmp_path: Path, db: HardwareDB, text: str) -> None:
    path = tmp_path / "floors.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_floors(db, path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
