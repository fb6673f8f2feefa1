"""The validated-data cache gives back what validating gives, is keyed by the data and the code that builds it, and
never runs what a planted entry names."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest

from linkscope.hardware import built_cache, parsed_cache
from linkscope.hardware.loader import load_db


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "built"


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    data, code = tmp_path / "data.yaml", tmp_path / "builder.py"
    data.write_text("value: 1\n")
    code.write_text("# the code that builds\n")
    return data, code


class _Counted:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dict[str, object]:
        self.calls += 1
        return {"calls": self.calls, "nested": [1.5, (2, "x")], "set": frozenset({3})}


def test_the_second_call_is_served_from_the_cache(cache: Path, inputs: tuple[Path, Path]) -> None:
    data, code = inputs
    build = _Counted()
    first = built_cache.cached("t", [data], [code], build)
    again = built_cache.cached("t", [data], [code], build)
    assert build.calls == 1 and again == first and again is not first
    assert len(list(cache.glob("t-*.pickle"))) == 1


def test_an_edited_data_file_or_builder_is_built_again(cache: Path, inputs: tuple[Path, Path]) -> None:
    data, code = inputs
    build = _Counted()
    built_cache.cached("t", [data], [code], build)
    data.write_text("value: 2\n")
    assert built_cache.cached("t", [data], [code], build)["calls"] == 2
    code.write_text("# the code that builds, edited\n")
    os.utime(code, ns=(1, 1))
    assert built_cache.cached("t", [data], [code], build)["calls"] == 3


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff binary", pickle.dumps({"calls": 1})[:-3], b"\x80\x05" * 5000,
                                     hashlib.sha256(b"\x80\x05N").digest() + b"\x80\x05N"])
def test_a_garbage_entry_is_built_again_and_replaced(cache: Path, inputs: tuple[Path, Path], garbage: bytes) -> None:
    data, code = inputs
    build = _Counted()
    built_cache.cached("t", [data], [code], build)
    (entry,) = cache.glob("t-*.pickle")
    entry.write_bytes(garbage)
    assert built_cache.cached("t", [data], [code], build)["calls"] == 2
    assert built_cache.cached("t", [data], [code], build)["calls"] == 2


class _Planted:
    """Unpickling this would call os.system: what a hostile entry would try."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, ("touch planted-ran",)


def test_a_planted_entry_naming_other_code_is_refused(cache: Path, inputs: tuple[Path, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data, code = inputs
    build = _Counted()
    built_cache.cached("t", [data], [code], build)
    (entry,) = cache.glob("t-*.pickle")
    payload = pickle.dumps(_Planted())
    entry.write_bytes(hashlib.sha256(payload).digest() + payload)  # a checksum that matches: only the names stop it
    assert built_cache.cached("t", [data], [code], build)["calls"] == 2
    assert not (tmp_path / "planted-ran").exists()


def test_an_unreadable_input_or_a_disabled_cache_just_builds(tmp_path: Path, inputs: tuple[Path, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    data, code = inputs
    build = _Counted()
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, "")
    assert [built_cache.cached("t", [data], [code], build)["calls"] for _ in range(2)] == [1, 2]
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    missing = tmp_path / "gone.yaml"
    assert [built_cache.cached("t", [missing], [code], build)["calls"] for _ in range(2)] == [3, 4]


def test_an_unwritable_cache_folder_just_builds(tmp_path: Path, inputs: tuple[Path, Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, str(blocker))
    data, code = inputs
    build = _Counted()
    assert [built_cache.cached("t", [data], [code], build)["calls"] for _ in range(2)] == [1, 2]


def test_the_shipped_database_comes_back_equal(cache: Path) -> None:
    fresh = load_db(include_user=False)
    again = load_db(include_user=False)
    assert again == fresh and again.offerings == fresh.offerings
    assert {p.name.split("-")[0] for p in cache.glob("*.pickle")} == {"hardware"}


def _one_entry(cache: Path, inputs: tuple[Path, Path]) -> tuple[Path, _Counted]:
    data, code = inputs
    build = _Counted()
    built_cache.cached("t", [data], [code], build)
    (entry,) = cache.glob("t-*.pickle")
    return entry, build


@pytest.mark.parametrize("payload", [{"calls": 99}, ["not", "ours"], ("linkscope.built_cache", "other", "dict", {})])
def test_a_checksum_valid_entry_of_the_wrong_shape_is_rebuilt(cache: Path, inputs: tuple[Path, Path],
                                                              payload: object) -> None:
    entry, build = _one_entry(cache, inputs)
    entry.unlink()
    parsed_cache.write_checked(entry, pickle.dumps(payload))
    assert built_cache.cached("t", list(inputs[:1]), list(inputs[1:]), build)["calls"] == 2


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_an_entry_that_is_no_regular_file_of_bounded_size_is_never_read(cache: Path, inputs: tuple[Path, Path],
                                                                        kind: str) -> None:
    entry, build = _one_entry(cache, inputs)
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "dev-zero":
        entry.symlink_to("/dev/zero")
    else:
        with open(entry, "wb") as fh:  # sparse: 2 GiB of size, no disk
            fh.truncate(2 * 2**30)
    assert parsed_cache.read_checked(entry) is None
    assert built_cache.cached("t", list(inputs[:1]), list(inputs[1:]), build)["calls"] == 2
