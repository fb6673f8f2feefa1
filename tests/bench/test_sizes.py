"""Sizes: parsing `-b/-e`, the sweep, and per-op counts as nccl-tests' getCollByteCount computes them."""

from __future__ import annotations

import pytest

from linkscope.bench.sizes import Counts, coll_counts, parse_size, per_rank_base, size_sweep
from linkscope.hardware.errors import UserError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("1K", 1024), ("8M", 8 * 1024**2), ("1G", 1024**3), ("2k", 2048), ("4MB", 4 * 1024**2),
     (" 16 ", 16), (64, 64)],
)
def test_parse_size_accepts_integers_and_binary_suffixes(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "0K", "-8", "abc", "1.5M", "8X", "", "M"])
def test_parse_size_rejects_zero_and_garbage(text: str) -> None:
    with pytest.raises(UserError, match="size|byte"):
        parse_size(text, "-b/--min-bytes")


def test_parse_size_names_the_option_in_the_error() -> None:
    with pytest.raises(UserError, match="-e/--max-bytes"):
        parse_size("lots", "-e/--max-bytes")


def test_sweep_multiplies_by_the_factor_up_to_max() -> None:
    assert size_sweep(8, 64, 2) == [8, 16, 32, 64]
    assert size_sweep(8, 100, 4) == [8, 32]
    assert size_sweep(1024, 1024, 1) == [1024]


def test_sweep_rejects_min_above_max_and_small_factors() -> None:
    with pytest.raises(UserError, match="larger than max"):
        size_sweep(64, 8, 2)
    with pytest.raises(UserError, match="step factor"):
        size_sweep(8, 64, 1)


def test_default_cpu_sweep_has_24_sizes() -> None:
    assert len(size_sweep(8, 64 * 1024**2, 2)) == 24


def test_per_rank_base_rounds_down_to_16_bytes() -> None:
    # float (4 B): multiples of 4 elements; double: of 2; int8: of 16.
    assert per_rank_base(2, 4, 2) == 0
    assert per_rank_base(262144, 4, 2) == 131072
    assert per_rank_base(1000, 4, 3) == 332
    assert per_rank_base(1000, 8, 3) == 332
    assert per_rank_base(1000, 1, 3) == 320


def test_all_reduce_counts_are_the_whole_buffer() -> None:
    assert coll_counts("same", 1024, 4, 8) == Counts(256, 256, 256, 0, 0)


def test_all_gather_counts_match_nccl_tests() -> None:
    counts = coll_counts("gather", 1024**2, 4, 2)
    assert counts == Counts(send=131072, recv=262144, param=131072, send_inplace_offset=131072, recv_inplace_offset=0)
    assert counts.size_bytes(4) == 1024**2


def test_small_all_gather_rounds_to_zero_like_nccl_tests() -> None:
    counts = coll_counts("gather", 8, 4, 2)
    assert (counts.param, counts.size_bytes(4)) == (0, 0)


def test_reduce_scatter_and_alltoall_counts() -> None:
    assert coll_counts("scatter", 1024, 4, 4) == Counts(256, 64, 64, 0, 64)
    assert coll_counts("alltoall", 1024, 4, 4) == Counts(256, 256, 64, 0, 0)


def test_size_column_is_the_larger_buffer_with_uneven_ranks() -> None:
    # 3 ranks: 1000 floats -> base 332 (16-byte aligned) -> 996 elements gathered.
    counts = coll_counts("gather", 4000, 4, 3)
    assert counts.size_bytes(4) == 996 * 4
