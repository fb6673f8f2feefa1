"""Loading the packaged hardware data: GPUs, links, presets and the lookups built on them."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from linkscope.hardware import loader
from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import load_db

REQUIRED_GPUS = ["V100-SXM2-32GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIe-80GB", "H100-SXM5-80GB",
                 "H100-PCIe-80GB", "H100-NVL-94GB", "H200-SXM-141GB", "B200-SXM-180GB", "GB200", "L40S", "L4",
                 "A10G", "RTX-4090", "MI300X"]
REQUIRED_LINKS = ["nvlink1", "nvlink2", "nvlink3", "nvlink4", "nvlink5", "nvlink6", "pcie3", "pcie4", "pcie5",
                  "pcie6", "ib-edr", "ib-hdr", "ib-ndr", "ib-xdr", "roce", "efa", "tcp"]


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def test_every_required_gpu_and_link_is_present(db) -> None:
    assert set(REQUIRED_GPUS) <= set(db.gpus)
    assert set(REQUIRED_LINKS) <= set(db.links)


def test_every_entry_has_provenance(db) -> None:
    entries = [*db.gpus.values(), *db.links.values(), *db.systems.values(),
               *(o for o in db.offerings.values())]
    for entry in entries:
        assert entry.source, entry.id
        assert isinstance(entry.as_of, date), entry.id


def test_dense_not_sparse_tflops(db) -> None:
    # Datasheets print sparse figures; the H100 dense BF16 figure is 989.4, not 1,979.
    assert db.gpus["H100-SXM5-80GB"].dense_tflops("bf16") == pytest.approx(989.4)
    assert db.gpus["A100-SXM4-80GB"].dense_tflops("bf16") == 312
    assert db.gpus["B200-SXM-180GB"].dense_tflops("fp8") == 4500


def test_v100_has_no_bf16_and_falls_back_to_fp16(db) -> None:
    v100 = db.gpus["V100-SXM2-32GB"]
    assert v100.bf16_dense_tflops is None
    assert v100.dense_tflops("bf16") == 125
    with pytest.raises(ValueError):
        v100.dense_tflops("fp8")


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("nvidia geforce rtx 4090", "RTX-4090"),
    ("h200", "H200-SXM-141GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
])
def test_gpu_lookup_by_the_names_nvidia_smi_prints(db, name: str, expected: str) -> None:
    assert db.gpu(name).id == expected


def test_link_rates_are_per_direction(db) -> None:
    # 900 GB/s NVLink 4 is bidirectional: 450 per direction; HDR is 200 Gbit/s = 25 GB/s per port.
    assert db.links["nvlink4"].bw_gb_per_s == 450
    assert db.links["nvlink5"].bw_gb_per_s == 900
    assert db.links["ib-hdr"].gbit_per_s == 200
    assert db.links["pcie5"].bw_gb_per_s == 63
    assert db.links["efa"].bw_gb_per_s is None


def _one_offering(path: Path) -> Path:
    path.write_text("provider: acme\nofferings:\n  - {instance: big.8x, gpu: H100, gpus: 8, scale_up: {kind: nvswitch},"
                    " source: acme price list, as_of: 2026-11-01}\n")
    return path


def test_offerings_read_on_first_use_equal_those_read_with_a_file_that_adds_one(tmp_path: Path) -> None:
    # Another file's offering makes the packaged ones load at once (its id must be checked against theirs); a
    # command that never asks for offerings reads them on first use. Both ways give the same catalog.
    on_use = load_db(include_user=False)
    at_once = load_db([_one_offering(tmp_path / "acme.yaml")], include_user=False)
    assert at_once.offerings.pop("acme/big.8x").provider == "acme"
    assert on_use.offerings == at_once.offerings
    assert on_use.systems == at_once.systems and on_use.gpus == at_once.gpus
    assert on_use.files == at_once.files[:-1]


def test_a_packaged_offering_file_holds_only_a_provider_and_offerings(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Read only when offerings are needed, it could not add a GPU or System that a command asked for before.
    data = tmp_path / "data"
    shutil.copytree(loader.DATA_DIR, data)
    (data / "offerings" / "acme.yaml").write_text(
        (data / "offerings" / "aws.yaml").read_text().replace("provider: aws", "provider: acme")
        + "\ngpus: []\n")
    monkeypatch.setattr(loader, "DATA_DIR", data)
    db = load_db(include_user=False)
    assert "dgx-h100" in db.systems
    with pytest.raises(DataError, match=r"acme\.yaml: unknown section 'gpus' \(expected one of offerings, provider\)"):
        len(db.offerings)
