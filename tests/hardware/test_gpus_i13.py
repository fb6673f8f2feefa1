"""GPU data fixed or added for issue 13: names that resolve, host links, and AMD scale-up the model can use."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.loader import load_db, load_system_file
from linkscope.model.comm.tiers import comm_tiers


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


@pytest.mark.parametrize("name, expected", [
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"), ("V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"), ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"),
    ("H200 NVL", "H200-NVL-141GB"), ("GH200", "GH200-96GB"), ("B300", "B300-SXM-288GB"), ("GB300", "GB300"),
    ("RTX PRO 6000", "RTX-PRO-6000-Blackwell"), ("MI325X", "MI325X"), ("AMD Instinct MI355X", "MI355X"),
])
def test_new_names_resolve(db, name: str, expected: str) -> None:
    spec = db.gpu(name)
    assert spec is not None and spec.id == expected


def test_v100_sizes_are_distinct(db) -> None:
    assert db.gpu("V100-SXM2-16GB").memory_gib == 16
    assert db.gpu("V100-SXM2-32GB").memory_gib == 32


def test_h100_nvlink_is_not_guessed(db) -> None:
    # Some providers mean SXM by it, others PCIe cards with an NVLink bridge: no alias rather than a wrong one.
    assert db.gpu("H100-NVLINK") is None


def test_grace_superchips_reach_the_cpu_over_nvlink_c2c(db) -> None:
    for gpu in ("GB200", "GB300", "GH200-96GB"):
        assert db.gpus[gpu].pcie == "nvlink-c2c"
    assert db.links["nvlink-c2c"].bw_gb_per_s == 450  # 900 GB/s bidirectional


@pytest.mark.parametrize("gpu", ["MI300X", "MI325X", "MI355X"])
def test_amd_infinity_fabric_mesh_is_modelled(db, tmp_path: Path, gpu: str) -> None:
    path = tmp_path / "amd.yaml"
    path.write_text(f"gpu: {gpu}\ngpus: 8\nscale_up: {{kind: xgmi-mesh}}\nsource: test\nas_of: 2026-12-01\n")
    system = load_system_file(path, db)
    tiers = comm_tiers(system)
    assert system.node.scale_up.kind == "xgmi-mesh"
    assert system.node.scale_up.bw_gb_per_s > 0
    assert tiers is not None


def test_bare_v100_is_the_16gb_board_the_clouds_mean() -> None:
    from linkscope.hardware.loader import load_db

    db = load_db(include_user=False)
    assert db.gpu("V100").id == "V100-SXM2-16GB"
    assert db.gpu("V100-32GB").id == "V100-SXM2-32GB"
