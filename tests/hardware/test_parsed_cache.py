"""The parsed-YAML cache gives back exactly what parsing gives, and never stands between a user and their file."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest

from linkscope.hardware import parsed_cache
from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import DATA_DIR, load_db, parse_yaml, parse_yaml_text

TEXT = """\
source: a page
as_of: 2025-06-01
read_at: 2025-06-01 12:30:00+02:00
rates: {fp16: 989.5, tiny: 1.0e-300, big: 123456789012345678901234567890, none: null, inf: .inf, flag: yes}
names: [a, "b: c", "\\u00e9t\\u00e9"]
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, str(tmp_path))
    return tmp_path / "yaml"


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json")) if cache.is_dir() else []


def test_a_cached_parse_equals_a_fresh_one_dates_and_all(cache: Path) -> None:
    fresh = parse_yaml(TEXT)
    assert len(_entries(cache)) == 1
    again = parse_yaml(TEXT)
    assert again == fresh
    assert isinstance(again["as_of"], dt.date) and not isinstance(again["as_of"], dt.datetime)
    assert again["read_at"] == dt.datetime(2025, 6, 1, 12, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert math.isinf(again["rates"]["inf"]) and again["rates"]["big"] == 123456789012345678901234567890
    assert again is not fresh and again["names"] is not fresh["names"]


def test_the_second_read_comes_from_the_cache(cache: Path) -> None:
    parse_yaml(TEXT)
    (entry,) = _entries(cache)
    parsed_cache.write_checked(entry, b'{"planted": true}')  # what the cache holds is what a hit returns
    assert parse_yaml(TEXT) == {"planted": True}


def test_a_damaged_entry_that_is_still_json_is_not_used(cache: Path) -> None:
    expected = parse_yaml(TEXT)
    (entry,) = _entries(cache)
    data = entry.read_bytes()
    assert b"989.5" in data
    entry.write_bytes(data.replace(b"989.5", b"988.5"))  # one flipped digit: valid JSON, another number
    assert parse_yaml(TEXT) == expected


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff\xfe binary", b'{"truncated": [1, 2', b"[" * 100_000])
def test_a_garbage_entry_is_parsed_again_and_replaced(cache: Path, garbage: bytes) -> None:
    expected = parse_yaml(TEXT)
    (entry,) = _entries(cache)
    entry.write_bytes(garbage)
    assert parse_yaml(TEXT) == expected
    assert parse_yaml(TEXT) == expected
    assert entry.read_bytes() != garbage


def test_an_edited_text_is_a_new_entry(cache: Path) -> None:
    assert parse_yaml("a: 1\n") == {"a": 1}
    assert parse_yaml("a: 2\n") == {"a": 2}
    assert len(_entries(cache)) == 2


@pytest.mark.parametrize("text", [
    "shared: &x [1, 2]\nagain: *x\n",  # one list in two places: JSON would make two
    "1: an int key\n",
    "2024-01-01: a date key\n",
    "s: !!set {a, b}\n",
    "b: !!binary aGVsbG8=\n",
    "tag: {\"\\0date\": 2024-01-01}\n",  # a mapping that looks like the cache's own date tag
])
def test_values_json_would_change_are_not_cached(cache: Path, text: str) -> None:
    first = parse_yaml(text)
    assert parse_yaml(text) == first
    assert _entries(cache) == []


def test_an_alias_still_shares_its_node(cache: Path) -> None:
    parsed = parse_yaml("shared: &x [1, 2]\nagain: *x\n")
    assert parsed["shared"] is parsed["again"]


def test_a_bad_file_is_still_reported_and_never_cached(cache: Path) -> None:
    for text in ("a: 1\na: 2\n", "as_of: 2026-13-45\n", "a: [1, 2\n"):
        with pytest.raises(DataError):
            parse_yaml_text(text, "x.yaml")
    assert _entries(cache) == []


def test_an_unwritable_cache_is_only_slower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, str(blocker))
    assert parse_yaml(TEXT) == parse_yaml(TEXT)


def test_an_empty_setting_turns_the_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, "")
    monkeypatch.chdir(tmp_path)
    assert parse_yaml("a: 1\n") == {"a": 1}
    assert list(tmp_path.rglob("*.json")) == []


def test_the_cache_keeps_at_most_its_bound(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parsed_cache, "MAX_ENTRIES", 3)
    for i in range(6):
        parse_yaml(f"a: {i}\n")
    assert len(_entries(cache)) == 3
    assert parse_yaml("a: 5\n") == {"a": 5}


def test_every_packaged_data_file_is_cached_and_loads_the_same(cache: Path) -> None:
    texts = [path.read_text(encoding="utf-8") for path in sorted(DATA_DIR.rglob("*.yaml"))]
    fresh = [parse_yaml(text) for text in texts]
    assert len(_entries(cache)) == len(texts)
    assert [parse_yaml(text) for text in texts] == fresh
    first, second = load_db(include_user=False), load_db(include_user=False)
    assert first.gpus == second.gpus and first.systems == second.systems and first.links == second.links
