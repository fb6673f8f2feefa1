"""Keeping libkineto's trace markers off the user's terminal, and nothing else.

libkineto writes `USDT:... profiler_start` and `profiler_stop` (and, in older releases, `STAGE:` lines) on the
rank's stderr each time a trace starts and stops. torch quiets kineto to its ERROR level, but those markers sit
above it, so only `KINETO_LOG_LEVEL=6` would silence them, and that would hide kineto's real errors too. Instead
the rank's file descriptor 2 is caught around the profiler's start and stop, and every line but the markers is
written back, so a real warning or error still reaches the terminal (late by the length of the call, never lost).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

MARKER_PREFIXES = (b"USDT:", b"STAGE:")
"""Line starts of kineto's trace markers (log types above ERROR that say nothing went wrong)."""


def kept_lines(data: bytes, prefixes: tuple[bytes, ...] = MARKER_PREFIXES) -> bytes:
    """`data` without the lines that start with a marker prefix."""
    return b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(prefixes))


@contextmanager
def without_marker_lines(prefixes: tuple[bytes, ...] = MARKER_PREFIXES) -> Iterator[None]:
    """Run the block with fd 2 caught in a file (never a pipe, which a chatty block could fill), then write
    back what it wrote except the marker lines."""
    sys.stderr.flush()
    try:
        caught = tempfile.TemporaryFile()  # noqa: SIM115 - opened here to fall back when it cannot be, closed below
    except OSError:  # no writable temporary directory: markers on the terminal beat a failed run
        yield
        return
    saved = os.dup(2)
    with caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            _write_all(2, kept_lines(caught.read(), prefixes))


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte (os.write may write part); a stderr that refuses must not hide the block's own error."""
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data):]
