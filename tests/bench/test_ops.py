"""The op table: nccl-tests' busbw factors, algbw byte counts, labels and which results are checkable."""

from __future__ import annotations

import pytest

from linkscope.bench.ops import OPS, expand_op_names
from linkscope.bench.sizes import coll_counts
from linkscope.hardware.errors import UserError


@pytest.mark.parametrize(
    ("op", "factor_8"),
    [("all_reduce", 2 * 7 / 8), ("all_gather", 7 / 8), ("reduce_scatter", 7 / 8), ("all_to_all", 7 / 8),
     ("gather", 7 / 8), ("scatter", 7 / 8), ("broadcast", 1.0), ("reduce", 1.0), ("sendrecv", 1.0)],
)
def test_bus_factors_are_nccl_tests(op: str, factor_8: float) -> None:
    assert OPS[op].bus_factor(8) == pytest.approx(factor_8)


def test_single_rank_bus_bandwidth_is_zero_for_shared_ops() -> None:
    # The classic "Avg bus bandwidth 0" of a one-rank run.
    assert OPS["all_reduce"].bus_factor(1) == 0.0
    assert OPS["broadcast"].bus_factor(1) == 1.0


def test_algbw_bytes_scale_with_ranks_where_nccl_tests_does() -> None:
    n, size = 4, 1 << 20
    ag = OPS["all_gather"]
    counts = coll_counts(ag.count_kind, size, 4, n)
    assert ag.algbw_bytes(counts, 4, n) == counts.param * 4 * n == size
    ar = OPS["all_reduce"]
    assert ar.algbw_bytes(coll_counts("same", size, 4, n), 4, n) == size


def test_bandwidths_from_time() -> None:
    ar = OPS["all_reduce"]
    counts = coll_counts("same", 1_000_000_000, 1, 2)
    algbw, busbw = ar.bandwidths(counts, 1, 2, 0.5)
    assert algbw == pytest.approx(2.0)
    assert busbw == pytest.approx(2.0)  # 2(n-1)/n = 1 for two ranks
    assert ar.bandwidths(counts, 1, 2, 0.0) == (0.0, 0.0)


def test_labels_follow_nccl_tests() -> None:
    assert OPS["all_gather"].redop_label("max") == "none"
    assert OPS["reduce"].redop_label("max") == "max"
    assert OPS["all_reduce"].root_label(3) == -1
    assert OPS["broadcast"].root_label(3) == 3


def test_in_place_alltoall_is_never_checked_and_gloo_sendrecv_neither() -> None:
    assert not OPS["all_to_all"].checks_in_place("nccl")
    assert not OPS["sendrecv"].checks_in_place("gloo")
    assert OPS["sendrecv"].checks_in_place("nccl")
    assert OPS["all_reduce"].checks_in_place("gloo")


def test_perf_names_match_the_nccl_tests_binaries() -> None:
    assert OPS["all_to_all"].perf_name == "alltoall_perf"
    assert {o.perf_name for o in OPS.values()} >= {"all_reduce_perf", "sendrecv_perf", "scatter_perf"}


def test_unknown_op_lists_the_choices() -> None:
    with pytest.raises(UserError, match="choose from: all, all_reduce"):
        expand_op_names(["allsum"])
