"""`--system` accepts a preset, an offering id or a user's YAML file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.resolve import resolve_system
from linkscope.hardware.serialize import system_dict, system_from_dict
from tests.cli.helpers import run_cli

MY_SYSTEM = """
name: lab cluster
gpu: NVIDIA A100-SXM4-80GB
gpus: 4
scale_up: {kind: nvlink-mesh, generation: nvlink3}
scale_out: {fabric: roce, nics: 2, nic_gbit_per_s: 100, gpudirect_rdma: true}
nodes: 3
source: our rack inventory
as_of: 2026-10-01
"""


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def test_preset_and_offering_resolve(db) -> None:
    assert resolve_system("dgx-h100", db).node.gpu.id == "H100-SXM5-80GB"
    offering = resolve_system("aws/p5.48xlarge", db)
    assert offering.origin == "offering"
    assert offering.node.scale_out.fabric == "efa"


def test_user_system_file(tmp_path: Path, db) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(textwrap.dedent(MY_SYSTEM))
    system = resolve_system(str(path), db)
    assert (system.id, system.origin, system.nodes, system.gpus) == ("lab", "file", 3, 12)
    assert system.node.scale_up.is_mesh and system.node.scale_up.pair_bw_gb_per_s() == pytest.approx(100)
    assert system.node.scale_out.total_gbit_per_s == 200


def test_user_system_file_errors_name_the_field(tmp_path: Path, db) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent(MY_SYSTEM).replace("gpus: 4", "gpus: four"))
    with pytest.raises(DataError, match="bad.yaml: entry 'bad': field 'gpus'"):
        resolve_system(str(path), db)


def test_unknown_system_suggests_close_names(db) -> None:
    with pytest.raises(UserError, match="did you mean dgx-h100"):
        resolve_system("dgx-h10", db)


def test_unknown_system_names_every_kind_of_value(db) -> None:
    with pytest.raises(UserError, match="a YAML file or profile:NAME"):
        resolve_system("zzzzzz", db)


def test_system_json_round_trip(db) -> None:
    for system in [*db.systems.values(), db.offerings["aws/p5.48xlarge"].system]:
        again = system_from_dict(system_dict(system), db.gpu)
        assert again == system


def test_systems_show_accepts_an_offering() -> None:
    result = run_cli("systems", "show", "aws/p5.48xlarge", "--json")
    assert result.exit_code == 0
    assert '"fabric": "efa"' in result.stdout
