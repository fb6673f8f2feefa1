"""Validation of a run's options: one clear UserError per bad value, canonical names otherwise."""

from __future__ import annotations

import pytest

from linkscope.bench.config import BenchConfig, P2PConfig, RunOptions
from linkscope.bench.dtypes import DTYPES, dtype_by_name
from linkscope.bench.ops import OPS
from linkscope.hardware.errors import UserError


def test_defaults_validate_and_are_the_quick_cpu_sweep() -> None:
    cfg = BenchConfig().validated()
    assert (cfg.min_bytes, cfg.max_bytes, cfg.step_factor, cfg.iters, cfg.warmup) == (8, 64 * 1024**2, 2, 20, 5)
    assert cfg.ops == ("all_reduce",)


def test_all_expands_to_every_op_and_aliases_are_canonical() -> None:
    assert BenchConfig(ops=("all",)).validated().ops == tuple(OPS)
    assert BenchConfig(ops=("alltoall", "allreduce", "all_reduce_perf")).validated().ops == ("all_to_all", "all_reduce")


@pytest.mark.parametrize(("alias", "name"), [("float32", "float"), ("fp16", "half"), ("float16", "half"),
                                             ("bf16", "bfloat16"), ("float64", "double"), ("INT8", "int8")])
def test_dtype_aliases_map_to_nccl_tests_names(alias: str, name: str) -> None:
    assert BenchConfig(dtype=alias).validated().dtype == name


def test_every_dtype_names_a_torch_type() -> None:
    import torch

    for dt in DTYPES.values():
        assert torch.empty(0, dtype=getattr(torch, dt.torch_name)).element_size() == dt.size_bytes


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (BenchConfig(ops=("all_sum",)), "unknown collective 'all_sum'"),
        (BenchConfig(dtype="float8"), "unknown data type 'float8'"),
        (BenchConfig(redop="mulsum"), "unknown reduction operator 'mulsum'"),
        (BenchConfig(min_bytes=64, max_bytes=8), "larger than max"),
        (BenchConfig(iters=0), "-n/--iters"),
        (BenchConfig(average=4), "-a/--average"),
        (BenchConfig(blocking=2), "-z/--blocking"),
        (BenchConfig(cudagraph=2, blocking=1), "cannot be combined"),
        (BenchConfig(repeat=0), "--repeat"),
        (BenchConfig(min_time_s=-1), "--min-time"),
        (BenchConfig(run=RunOptions(backend="mpi")), "unknown backend 'mpi'"),
        (BenchConfig(run=RunOptions(nproc=0)), "^nproc: "),
        (BenchConfig(run=RunOptions(timeout_s=0)), "^--timeout must be more than 0"),
    ],
)
def test_bad_values_are_user_errors_naming_the_value(cfg: BenchConfig, message: str) -> None:
    with pytest.raises(UserError, match=message):
        cfg.validated()


def test_p2p_config_validation() -> None:
    assert P2PConfig().validated().size_bytes == 32 * 1024**2
    with pytest.raises(UserError, match="^size: "):
        P2PConfig(size_bytes=0).validated()


def test_dtype_lookup_error_lists_the_choices() -> None:
    with pytest.raises(UserError, match="bfloat16"):
        dtype_by_name("fp8")
