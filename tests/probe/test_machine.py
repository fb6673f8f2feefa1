"""probe_machine: NVML first, then nvidia-smi, then a CPU-only result; sysfs for NICs, NUMA and the host."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from linkscope.probe.machine import probe_machine
from linkscope.probe.smi import TOPO_COMMAND
from tests.probe.fixtures import fixture_text, h100_smi_runner, replay, tree_paths
from tests.probe.test_nvml import hgx


def test_nvidia_smi_path_reads_gpus_links_matrix_and_nics() -> None:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    assert probe.gpu_source == "nvidia-smi"
    assert len(probe.gpus) == 8 and probe.gpus[0].active_nvlinks == 18
    assert probe.topo is not None and probe.topo.source == "nvidia-smi topo -m"
    assert [p.device for p in probe.rdma_ports] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [n.name for n in probe.ethernet] == ["eth0"]
    assert probe.peermem_module == "nvidia_peermem"
    assert probe.host.cpu_sockets == 2
    assert probe.problems == []


def test_nvml_is_preferred_and_nvidia_smi_still_gives_the_nic_matrix() -> None:
    runner = replay({TOPO_COMMAND: fixture_text("topo_hgx_h100.txt")})
    probe = probe_machine(runner=runner, paths=tree_paths(), nvml=hgx())
    assert probe.gpu_source == "nvml" and probe.driver_version == "550.90.07"
    assert probe.topo is not None and probe.topo.nics == ["NIC0", "NIC1"]


def test_nvml_matrix_is_used_when_nvidia_smi_is_absent() -> None:
    probe = probe_machine(runner=replay({}), paths=tree_paths(), nvml=hgx())
    assert probe.topo is not None and probe.topo.source == "nvml" and probe.topo.nics == []


def test_cpu_only_machine_gives_a_result_with_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    probe = probe_machine(runner=replay({}), paths=tree_paths())
    assert probe.gpu_source == "none" and probe.gpus == [] and probe.topo is None
    assert probe.notes == ["NVML: nvidia-ml-py (pynvml) is not installed", "nvidia-smi: `nvidia-smi` not found"]


def test_empty_sysfs_gives_no_nics_and_no_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    probe = probe_machine(runner=replay({}), paths=tree_paths(tmp_path))
    assert probe.rdma_ports == [] and probe.ethernet == [] and probe.peermem_module is None
    assert probe.host.numa_nodes == []


def test_json_form_is_stable_and_serialisable() -> None:
    probe = probe_machine(runner=h100_smi_runner(), paths=tree_paths(), use_nvml=False)
    data = json.loads(json.dumps(probe.to_dict()))
    assert list(data) == ["host", "gpu_source", "driver_version", "cuda_driver_version", "gpus", "topo",
                          "rdma_ports", "ethernet", "peermem_module", "fabric", "imex", "problems", "notes"]
    assert data["gpus"][3]["active_nvlinks"] == 17
    assert data["gpus"][0]["nvlink_reported_gb_per_s"] == 478.125
    assert data["rdma_ports"][3]["active"] is False
    assert data["topo"]["nic_names"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
