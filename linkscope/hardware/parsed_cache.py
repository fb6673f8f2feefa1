"""Parsed YAML kept as JSON, so that a command does not rebuild the same data files' objects on every start.

libyaml parses in C, but PyYAML still builds every key and value in Python: the nine data files `predict train`
reads cost it about as much time as the rest of the command's own work. JSON of the same values loads an order of
magnitude faster. An entry is keyed by the SHA-256 of the text (with PyYAML's version and this format's number), so
an edited file is simply a new entry and a stale one is never read. Each entry starts with the SHA-256 of the rest,
so a damaged one (a flipped digit would still be valid JSON) is never used. The cache is an optimisation only: a file
in it that cannot be read, checked, decoded or written is ignored, and the text is parsed as if there were no cache.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

CACHE_DIR_ENV = "LINKSCOPE_CACHE_DIR"
"""Overrides the platform's cache directory; set and empty, no cache is read or written."""
MAX_ENTRIES = 256
"""Beyond this many parsed files, the oldest are removed (each edit of a file adds one)."""
_FORMAT = 2
CHECKSUM_BYTES = 32
_DATE = "\x00date"
_DATETIME = "\x00datetime"
_MISS = object()


class _Uncacheable(Exception):
    """A value JSON cannot carry back unchanged: a key that is not a string, a set, bytes, a shared node."""


def cache_root() -> Path | None:
    """linkscope's cache folder: $LINKSCOPE_CACHE_DIR, else the platform's cache dir; None when disabled."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured is not None:
        return Path(configured) if configured else None
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("linkscope"))


def cache_dir() -> Path | None:
    """Where parsed files are kept: the `yaml` folder of `cache_root()`; None when disabled."""
    root = cache_root()
    return root / "yaml" if root is not None else None


def lookup(text: str) -> Any:
    """The value parsed earlier from exactly `text`, else the module's `_MISS` marker (see `is_miss`)."""
    path = _entry(text)
    if path is None:
        return _MISS
    payload = read_checked(path)
    if payload is None:
        return _MISS
    try:
        return json.loads(payload, object_hook=_decode_object)
    except (ValueError, TypeError, RecursionError):
        return _MISS


def is_miss(value: Any) -> bool:
    """Whether `lookup` found nothing."""
    return value is _MISS


def store(text: str, value: Any) -> None:
    """Keep `value`, parsed from `text`, for the next start; silently nothing when it cannot be kept."""
    path = _entry(text)
    if path is None:
        return
    try:
        encoded = json.dumps(_encode(value, set()), ensure_ascii=False, separators=(",", ":"))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_checked(path, encoded.encode("utf-8"))
        prune(path.parent, "*.json")
    except (_Uncacheable, OSError, ValueError, RecursionError):
        return


def _entry(text: str) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    digest = hashlib.sha256(f"{_FORMAT}:{yaml.__version__}:".encode() + text.encode("utf-8", "surrogatepass"))
    return folder / f"{digest.hexdigest()}.json"


def _encode(value: Any, seen: set[int]) -> Any:
    """`value` as JSON-ready data, dates tagged; raises _Uncacheable for anything JSON would change."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dt.datetime):
        return {_DATETIME: value.isoformat()}
    if isinstance(value, dt.date):
        return {_DATE: value.isoformat()}
    if not isinstance(value, (list, dict)) or id(value) in seen:
        # A YAML alias makes two places share one object; JSON would make them two copies.
        raise _Uncacheable(type(value).__name__)
    seen.add(id(value))
    if isinstance(value, list):
        return [_encode(item, seen) for item in value]
    if not all(isinstance(key, str) for key in value) or _DATE in value or _DATETIME in value:
        raise _Uncacheable("mapping key")
    return {key: _encode(item, seen) for key, item in value.items()}


def _decode_object(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        if _DATE in obj:
            return dt.date.fromisoformat(obj[_DATE])
        if _DATETIME in obj:
            return dt.datetime.fromisoformat(obj[_DATETIME])
    return obj


MAX_ENTRY_BYTES = 64 * 2**20
"""Entries are kilobytes (the largest, the hardware database, about 50 KiB); a bigger file there is not ours."""


def read_checked(path: Path) -> bytes | None:
    """The payload of an entry `write_checked` wrote; None when it is missing, unreadable, damaged, not a regular
    file (a FIFO would block every command, a link to /dev/zero never ends) or over MAX_ENTRY_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            return None
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_ENTRY_BYTES:
        return None
    checksum, payload = data[:CHECKSUM_BYTES], data[CHECKSUM_BYTES:]
    return payload if hashlib.sha256(payload).digest() == checksum else None


def write_checked(path: Path, payload: bytes) -> None:
    """Write `payload` after its SHA-256, through a temporary file in the same folder, so that a reader never sees
    half an entry and can tell a damaged one."""
    data = hashlib.sha256(payload).digest() + payload
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
        raise


def prune(folder: Path, pattern: str) -> None:
    """Keep the newest MAX_ENTRIES files of `folder` matching `pattern`."""
    entries = list(folder.glob(pattern))
    if len(entries) <= MAX_ENTRIES:
        return
    by_age = sorted(entries, key=lambda p: p.stat().st_mtime)
    for old in by_age[: len(entries) - MAX_ENTRIES]:
        old.unlink(missing_ok=True)
