"""Validated data kept between starts, so that a command does not validate the same shipped files on every run.

A command such as `predict train` reads nine packaged data files; checking them against their schemas means
building pydantic's validators for them first, and that cost a short command about a sixth of its time. The checked
result of the same files, built by the same code, is the same every time: it is kept here, pickled, under a key
made of the files' texts, the source files of the code that builds it and the Python and pydantic releases.
Edit a data file or that code and the key changes, so a stale entry is never read.

An entry starts with the SHA-256 of the rest, so a damaged one (a flipped bit would otherwise read back as another
number) is never used. Reading is the reverse of writing with nothing else allowed: only classes from linkscope and a
few standard value types can be named in an entry (pickle's documented way to refuse arbitrary code). An entry that
cannot be read for any reason is ignored and built again, as if there were no cache.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import pathlib
import pickle
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from linkscope.hardware import parsed_cache

T = TypeVar("T")

_FORMAT = 2
_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("datetime", "date"): dt.date,
    ("datetime", "datetime"): dt.datetime,
    ("pathlib", "PosixPath"): pathlib.PosixPath,
    ("pathlib", "WindowsPath"): pathlib.WindowsPath,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "set"): set,
}
_PACKAGE = "linkscope"
_MISS = object()


def cached(name: str, files: Iterable[Path], stamped: Iterable[Path], build: Callable[[], T]) -> T:
    """`build()`, or what it returned before for the same `files` (by their texts) and `stamped` (by path, size
    and modification time: the source files of the code that builds, and files the result names but never read).

    `build` must depend only on those; it runs, and its result is stored, whenever no valid entry exists. Errors
    it raises pass through and nothing is stored."""
    path = _entry(name, files, stamped)
    if path is not None:
        value = _unwrap(_load(path), name)
        if value is not _MISS:
            return value
    value = build()
    if path is not None:
        _store(path, (_TAG, name, _type_name(value), value))
    return value


_TAG = "linkscope.built_cache"
"""First item of every entry: a payload that is not (tag, name, type, value) was not written by `cached`."""


def _type_name(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _unwrap(entry: Any, name: str) -> Any:
    """The value of an entry written by `cached` for `name`, of the type it was written with; else _MISS (a
    checksum-valid pickle of a plain dict or list, or another builder's entry, is rebuilt, never returned)."""
    if not isinstance(entry, tuple) or len(entry) != 4 or entry[0] != _TAG or entry[1] != name:
        return _MISS
    value = entry[3]
    return value if _type_name(value) == entry[2] else _MISS


def _entry(name: str, files: Iterable[Path], stamped: Iterable[Path]) -> Path | None:
    root = parsed_cache.cache_root()
    if root is None:
        return None
    digest = hashlib.sha256(f"{_FORMAT}:{sys.version}:{_library_version('pydantic')}".encode())
    try:
        for stamp in stamped:
            stat = stamp.stat()
            digest.update(f"|{stamp}:{stat.st_mtime_ns}:{stat.st_size}".encode())
        for file in files:
            digest.update(f"|{file}:".encode() + file.read_bytes())
    except OSError:
        return None  # the builder reads the file again and reports what is wrong with it
    return root / "built" / f"{name}-{digest.hexdigest()}.pickle"


def _library_version(name: str) -> str:
    module = sys.modules.get(name)
    return str(getattr(module, "VERSION", getattr(module, "__version__", "")))


class _Unpickler(pickle.Unpickler):
    """Names only linkscope's classes and the standard value types our data holds; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[(module, name)]
        if module == _PACKAGE or module.startswith(_PACKAGE + "."):
            found = getattr(sys.modules.get(module), name, None)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a cache entry")


def _load(path: Path) -> Any:
    payload = parsed_cache.read_checked(path)
    if payload is None:
        return _MISS
    try:
        return _Unpickler(io.BytesIO(payload)).load()
    except Exception:  # a truncated or foreign entry may raise nearly anything while it is read; rebuild instead
        return _MISS


def _store(path: Path, value: Any) -> None:
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        path.parent.mkdir(parents=True, exist_ok=True)
        parsed_cache.write_checked(path, payload)
        parsed_cache.prune(path.parent, "*.pickle")
    except (OSError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return
