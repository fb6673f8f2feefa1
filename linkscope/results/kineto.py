"""Reading PyTorch-profiler (Kineto) Chrome-trace JSON one event at a time.

A training trace can be gigabytes; loading it whole is what makes trace tools run out of memory. This reader
walks the top-level object, decodes every value except `traceEvents` whole (they are small), and yields the
events of `traceEvents` one by one from a bounded buffer. `.json.gz` files are read through gzip.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from linkscope.hardware.errors import UserError

CHUNK_CHARS = 1 << 20
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


@dataclass
class TraceHeader:
    """The top-level fields other than the events (filled as they are met, which may be after the events)."""

    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int | None:
        """`distributedInfo.rank`, where the trace has it."""
        info = self.fields.get("distributedInfo") or {}
        rank = info.get("rank") if isinstance(info, dict) else None
        return int(rank) if rank is not None else None


class _Buffer:
    """Characters of a text stream with a cursor; refills in chunks and drops what was consumed."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.text = ""
        self.pos = 0
        self.eof = False

    def fill(self) -> bool:
        """Read one more chunk; False at the end of the stream."""
        if self.eof:
            return False
        chunk = self.stream.read(CHUNK_CHARS)
        if not chunk:
            self.eof = True
            return False
        self.text = self.text[self.pos:] + chunk
        self.pos = 0
        return True

    def skip_space(self) -> str:
        """The next non-blank character (not consumed); '' at the end."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.fill():
                return ""

    def expect(self, chars: str, where: str) -> str:
        """Consume one of `chars` (after blanks) and return it."""
        ch = self.skip_space()
        if not ch or ch not in chars:
            raise ValueError(f"expected {' or '.join(repr(c) for c in chars)} {where}, found {ch!r}")
        self.pos += 1
        return ch

    def value(self) -> Any:
        """Decode one JSON value at the cursor, reading more until it is complete."""
        self.skip_space()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                if self.fill():
                    continue
                raise
            # A number at the very end of the buffer may continue in the next chunk.
            if end == len(self.text) and not self.eof and self.fill():
                continue
            self.pos = end
            return obj


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def iter_events(path: Path, header: TraceHeader | None = None) -> Iterator[dict[str, Any]]:
    """Every event of `traceEvents`, in file order; other top-level fields go into `header`."""
    header = header if header is not None else TraceHeader()
    try:
        with _open_text(path) as stream:
            yield from _walk(_Buffer(stream), header)
    except (OSError, EOFError, ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable Kineto trace ({type(exc).__name__}: {str(exc)[:160]})") from None


def _walk(buf: _Buffer, header: TraceHeader) -> Iterator[dict[str, Any]]:
    buf.expect("{", "at the start of the trace")
    if buf.skip_space() == "}":
        return
    while True:
        key = buf.value()
        buf.expect(":", f"after key {key!r}")
        if key == "traceEvents":
            yield from _events(buf)
        else:
            header.fields[key] = buf.value()
        if buf.expect(",}", "between top-level fields") == "}":
            return


def _events(buf: _Buffer) -> Iterator[dict[str, Any]]:
    buf.expect("[", "at the start of traceEvents")
    if buf.skip_space() == "]":
        buf.pos += 1
        return
    while True:
        event = buf.value()
        if isinstance(event, dict):
            yield event
        if buf.expect(",]", "between events") == "]":
            return


def read_header(path: Path) -> TraceHeader:
    """The top-level fields (streams past the events without keeping them)."""
    header = TraceHeader()
    for _ in iter_events(path, header):
        pass
    return header


def scan(path: Path, visit: Callable[[dict[str, Any]], None]) -> TraceHeader:
    """Call `visit` on every event; return the header."""
    header = TraceHeader()
    for event in iter_events(path, header):
        visit(event)
    return header
