"""Impossible hardware in a System file: a GPU on a link generation it does not have is a named warning, a
bandwidth its links cannot carry is one line and exit 2."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.link_limits import HardwareWarning, max_bw_gb_per_s
from linkscope.hardware.loader import load_db, load_system_file
from tests.cli.helpers import run_cli


def _system(tmp_path: Path, gpu: str, scale_up: str) -> Path:
    path = tmp_path / "rack.yaml"
    path.write_text(textwrap.dedent(f"""
        gpu: {gpu}
        gpus: 8
        scale_up: {scale_up}
        scale_out: {{fabric: infiniband, nics: 8, nic_gbit_per_s: 200, gpudirect_rdma: true}}
        nodes: 2
        source: our inventory
        as_of: 2026-10-01
        """))
    return path


@pytest.mark.parametrize("gpu, scale_up, needle", [
    ("A100-SXM4-80GB", "{kind: nvswitch, generation: nvlink4}", "A100-SXM4-80GB has nvlink3, not nvlink4"),
    ("H100-SXM5-80GB", "{kind: nvswitch, generation: nvlink5}", "H100-SXM5-80GB has nvlink4, not nvlink5"),
    ("L40S", "{kind: nvlink-mesh, generation: nvlink4}", "L40S has no NVLink port"),
])
def test_a_gpu_on_a_generation_it_does_not_have_is_a_named_warning(tmp_path: Path, gpu: str, scale_up: str,
                                                                   needle: str) -> None:
    db = load_db([])
    with pytest.warns(HardwareWarning, match=needle) as caught:
        system = load_system_file(_system(tmp_path, gpu, scale_up), db)
    assert "rack.yaml" in str(caught[0].message) and "scale_up.generation" in str(caught[0].message)
    assert system.node.gpu.family_name in gpu


@pytest.mark.parametrize("gpu, scale_up, most", [
    ("A100-SXM4-80GB", "{kind: nvswitch, generation: nvlink3, bw_gb_per_s: 600}", "at most 300 GB/s"),
    ("H100-SXM5-80GB", "{kind: nvswitch, bw_gb_per_s: 900}", "at most 450 GB/s"),
    ("H100-PCIe-80GB", "{kind: nvlink-bridge, bw_gb_per_s: 450}", "at most 300 GB/s"),
    ("L40S", "{kind: pcie, bw_gb_per_s: 64}", "at most 31.5 GB/s"),
])
def test_a_bandwidth_the_links_cannot_carry_is_refused(tmp_path: Path, gpu: str, scale_up: str, most: str) -> None:
    with pytest.raises(DataError, match=most):
        load_system_file(_system(tmp_path, gpu, scale_up), load_db([]))


def test_the_command_line_warns_in_one_line_or_refuses_with_exit_2(tmp_path: Path) -> None:
    foreign = _system(tmp_path, "A100-SXM4-80GB", "{kind: nvswitch, generation: nvlink4}")
    with pytest.warns(HardwareWarning, match="A100-SXM4-80GB has nvlink3, not nvlink4"):
        warned = run_cli("predict", "collective", "-s", str(foreign), "--gpus", "8", "--json")
    assert warned.exit_code == 0 and "busbw" in warned.stdout
    impossible = _system(tmp_path, "A100-SXM4-80GB", "{kind: nvswitch, bw_gb_per_s: 5000}")
    refused = run_cli("predict", "collective", "-s", str(impossible), "--gpus", "8")
    assert refused.exit_code == 2 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "scale_up.bw_gb_per_s" in refused.stderr


def test_the_shipped_data_describes_only_possible_hardware() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", HardwareWarning)
        db = load_db([], include_user=False)
    systems = [*db.systems.values(), *(o.system for o in db.offerings.values())]
    for s in systems:
        node, link = s.node, db.links[s.node.scale_up.generation]
        most = max_bw_gb_per_s(node.gpu, link)
        assert most is None or node.scale_up.bw_gb_per_s <= most * 1.01, s.id
        assert link.family == "pcie" or link.id == node.gpu.scale_up_link, s.id
