"""Every text parser of the probe on cut and scrambled versions of the real fixtures: results, never tracebacks."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from linkscope.probe.fabric import parse_fabric, parse_imex_status
from linkscope.probe.nccl_log import analyse_nccl_log
from linkscope.probe.smi import parse_gpu_query, parse_nvlink_status
from linkscope.probe.topo_matrix import parse_topo_matrix
from tests.probe.fixtures import PROBE_FIXTURES

PARSERS: dict[str, Callable[[str], object]] = {
    "topo_hgx_h100.txt": parse_topo_matrix,
    "topo_dgx1_v100.txt": parse_topo_matrix,
    "nvlink_h100_8gpu.txt": parse_nvlink_status,
    "nvlink_gb200.txt": parse_nvlink_status,
    "query_gpu_h100_8gpu.csv": parse_gpu_query,
    "nccl_samples.log": analyse_nccl_log,
    "nccl_2node_roce_no_gdr.log": analyse_nccl_log,
    "smi_qx_gb200_tray.xml": parse_fabric,
    "smi_q_fabric_unhealthy.txt": parse_fabric,
    "smi_q_t4_no_fabric.txt": parse_fabric,
    "imex_ctl_p6e_ultraserver.txt": parse_imex_status,
}


def _variants(text: str, seed: int) -> list[str]:
    """The text cut at many points, with lines dropped or duplicated, and with characters replaced."""
    rng = random.Random(seed)
    lines = text.splitlines()
    cuts = [text[:i] for i in range(0, len(text), max(1, len(text) // 40))]
    dropped = ["\n".join(line for line in lines if rng.random() > 0.3) for _ in range(10)]
    shuffled = ["\n".join(rng.sample(lines, len(lines))) for _ in range(5)]
    noise = "\x1b[4m\t []:/()<>-0123456789 NV X GB/s via NET/IB/"
    scrambled = ["".join(rng.choice(noise) if rng.random() < 0.05 else ch for ch in text) for _ in range(10)]
    return cuts + dropped + shuffled + scrambled


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parsers_survive_damaged_input(name: str) -> None:
    text = (PROBE_FIXTURES / name).read_text(encoding="utf-8")
    parse = PARSERS[name]
    for variant in _variants(text, seed=len(name)):
        assert parse(variant) is not None
