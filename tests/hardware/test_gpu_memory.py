"""GPU memory in GiB comes from the vendor's figure and what its "GB" is: every figure is converted, and the unit chosen
for each is the one nvidia-smi (amd-smi) agrees with."""

from __future__ import annotations

import pytest

from linkscope.hardware.loader import DATA_DIR, load_db, read_yaml
from linkscope.hardware.schema import GIB_PER_GB, GpuEntry

REPORTED_MIB = {
    # memory.total as printed by nvidia-smi in public run logs (e.g. 'NVIDIA B300 SXM6 AC, 275040 MiB', driver 580);
    # MI300X from rocm-smi's 'VRAM Total Memory (B): 206141652992'. Readings sit a little under the physical memory
    # (the driver reserves some), so they choose between binary and decimal gigabytes; they are not the figure kept.
    "A100-SXM4-40GB": 40960,
    "A100-SXM4-80GB": 81920,
    "H100-SXM5-80GB": 81559,
    "H200-SXM-141GB": 143771,
    "B200-SXM-180GB": 183359,
    "GB200": 189471,
    "B300-SXM-288GB": 275040,
    "GB300": 284208,
    "RTX-PRO-6000-Blackwell": 97887,
    "MI300X": 206141652992 / 2**20,
}


def _entries() -> list[GpuEntry]:
    return [GpuEntry.model_validate(raw) for raw in read_yaml(DATA_DIR / "gpus.yaml")["gpus"]]


def test_every_gb_figure_is_converted_by_its_unit() -> None:
    db = load_db(include_user=False)
    entries = _entries()
    assert entries and all(e.memory_gb is not None and e.memory_gb_unit for e in entries)
    for e in entries:
        assert e.memory_gb is not None
        expected = e.memory_gb if e.memory_gb_unit == "GiB" else e.memory_gb * 1e9 / 2**30
        assert db.gpus[e.id].memory_gib == pytest.approx(expected, abs=0.005), e.id


def test_blackwell_ultra_288_gb_is_decimal() -> None:
    db = load_db(include_user=False)
    for gpu in ("B300-SXM-288GB", "GB300"):
        assert db.gpus[gpu].memory_gib == pytest.approx(288 * GIB_PER_GB, abs=0.005) == pytest.approx(268.22, abs=0.01)
    assert db.gpus["MI355X"].memory_gib == 288  # AMD's 288 GB is binary, as its 192 GB MI300X reads


@pytest.mark.parametrize("gpu", sorted(REPORTED_MIB))
def test_the_unit_is_the_one_the_driver_reports(gpu: str) -> None:
    entry = next(e for e in _entries() if e.id == gpu)
    assert entry.memory_gb is not None
    reported_gib = REPORTED_MIB[gpu] / 1024
    as_binary, as_decimal = entry.memory_gb, entry.memory_gb * GIB_PER_GB
    closer = "GiB" if abs(as_binary - reported_gib) <= abs(as_decimal - reported_gib) else "GB"
    assert entry.memory_gb_unit == closer
    assert abs(entry.derived_memory_gib - reported_gib) / reported_gib < 0.04


def test_a_gpu_file_gives_one_memory_figure(tmp_path) -> None:
    from linkscope.hardware.errors import DataError

    base = ("gpus:\n  - {id: X1, vendor: nvidia, arch: a, form_factor: SXM, hbm_gb_per_s: 1, fp16_dense_tflops: 1, "
            "pcie: pcie5, source: t, as_of: 2026-01-01, %s}\n")
    for memory, error in (("memory_gb: 80", "needs memory_gb_unit"),
                          ("memory_gb: 80, memory_gb_unit: GiB, memory_gib: 80", "not both"), ("", "not both")):
        path = tmp_path / "g.yaml"
        path.write_text(base % memory if memory else base.replace(", %s", ""))
        with pytest.raises(DataError, match=error):
            load_db([path], include_user=False)
    path.write_text(base % "memory_gib: 24")
    assert load_db([path], include_user=False).gpus["X1"].memory_gib == 24
