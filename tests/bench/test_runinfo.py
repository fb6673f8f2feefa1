"""The metadata stored with every run."""

from __future__ import annotations

import pytest

from linkscope import __version__
from linkscope.bench.config import BenchConfig, RunOptions
from linkscope.bench.runinfo import _probed_system, build_run_info, config_dict, nccl_env, versions


def test_versions_name_torch_python_and_linkscope() -> None:
    v = versions()
    assert v["linkscope"] == __version__
    assert v["torch"] and v["python"]


def test_only_nccl_variables_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("NOT_NCCL", "x")
    env = nccl_env()
    assert env["NCCL_ALGO"] == "Ring" and "NOT_NCCL" not in env


def test_config_has_nccl_tests_names_too() -> None:
    data = config_dict("bench", BenchConfig(warmup=3, check=2, ops=("all_reduce",)).validated(), 4)
    assert (data["warmup_iters"], data["validation"], data["agg_iters"], data["graph"]) == (3, 2, 1, 0)
    assert data["min_bytes"] == 8 and data["run"]["nproc"] == 4


def test_run_info_for_a_new_run() -> None:
    info = build_run_info("bench", BenchConfig(run=RunOptions(label="x")).validated(), "gloo", 2)
    assert (info.kind, info.label, info.backend, info.world_size, info.status) == ("bench", "x", "gloo", 2, "running")
    assert info.command


def test_probed_system_is_a_dict_or_none_without_raising() -> None:
    system = _probed_system()
    assert system is None or "gpu" in system
