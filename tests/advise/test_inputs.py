"""Parsing what users type for `advise`: token counts, durations, money, GPU ranges, and the defaults."""

from __future__ import annotations

import pytest

from linkscope.advise.inputs import (node_counts_in_range, parse_count, parse_deadline, parse_duration_s,
                                     parse_gpu_range, parse_money_usd)
from linkscope.advise.objective import DEFAULT_DEADLINE_S
from linkscope.hardware.errors import UserError


@pytest.mark.parametrize(("text", "value"), [
    ("2e12", 2e12), ("300B", 3e11), ("300b", 3e11), ("1.5T", 1.5e12), ("500M", 5e8), ("50k", 5e4),
    ("2,000,000", 2e6), ("2_000", 2e3), (" 7 ", 7.0), ("2G", 2e9),
])
def test_token_counts_take_scientific_notation_and_suffixes(text: str, value: float) -> None:
    assert parse_count(text, "--tokens") == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "300X", "-5", "0", "1e400", "B"])
def test_bad_token_counts_name_the_flag(text: str) -> None:
    with pytest.raises(UserError, match="--tokens"):
        parse_count(text, "--tokens")


@pytest.mark.parametrize(("text", "seconds"), [
    ("30d", 30 * 86400), ("36h", 36 * 3600), ("90min", 5400), ("2w", 14 * 86400), ("45s", 45), ("1.5d", 129600),
    ("1y", 365 * 86400),
])
def test_durations_need_a_unit(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "soon", "0d", "-3d", "0", "-1", "nan", "inf d"])
def test_bad_durations_are_user_errors(text: str) -> None:
    with pytest.raises(UserError, match="--deadline"):
        parse_duration_s(text)


def test_the_deadline_defaults_to_a_quarter_and_none_removes_it() -> None:
    default = parse_deadline(None)
    assert default.deadline_s == DEFAULT_DEADLINE_S == 90 * 86400 and default.deadline_is_default
    assert parse_deadline("none").deadline_s is None and parse_deadline(" None ").deadline_s is None
    given = parse_deadline("30d")
    assert given.deadline_s == 30 * 86400 and not given.deadline_is_default
    assert parse_deadline("10y").deadline_s == 3650 * 86400
    with pytest.raises(UserError, match="longer than 10 years"):
        parse_deadline("1000y")


def test_budget_accepts_suffixes_and_refuses_negative_values() -> None:
    assert parse_money_usd("$1.2M") == pytest.approx(1.2e6)
    assert parse_money_usd("50k") == pytest.approx(5e4)
    with pytest.raises(UserError, match="negative"):
        parse_money_usd("-100")


def test_gpu_range_parses_and_validates() -> None:
    assert parse_gpu_range("8..1024") == (8, 1024)
    for bad in ("8-1024", "1024..8", "0..8", "a..b", "8.."):
        with pytest.raises(UserError, match="--gpus-range"):
            parse_gpu_range(bad)


def test_range_tries_power_of_two_whole_nodes() -> None:
    assert node_counts_in_range(8, 1024, 8) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert node_counts_in_range(16, 64, 8) == [2, 4, 8]
    assert node_counts_in_range(8, 1024, 72) == [1, 2, 4, 8]
    assert node_counts_in_range(8, 64, 72) == []


