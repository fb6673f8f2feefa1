"""Message sizes: parsing `-b/-e`, the min..max sweep, and per-op element counts as nccl-tests computes them.

Source of the count rules: the `*GetCollByteCount` functions and `setupArgs` in nccl-tests `src/*.cu`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from linkscope.hardware.errors import UserError

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
MAX_SIZE_BYTES = 1024**4
"""1 TiB: no device holds a buffer this large, so a bigger size is a typo, refused before anything starts."""
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int, what: str = "size") -> int:
    """Parse `8`, `1K`, `8M`, `1G` (powers of two, as nccl-tests does) into bytes; reject zero and garbage."""
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE_RE.match(text)
        if match is None:
            raise UserError(f"{what} '{text}' is not a size: use an integer with an optional K, M or G suffix")
        value = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if value <= 0:
        raise UserError(f"{what} must be at least 1 byte, got '{text}'")
    check_size_cap(value, what)
    return value


def check_size_cap(size_bytes: int, what: str = "size") -> None:
    """Refuse sizes above MAX_SIZE_BYTES (surely a typo) with one line."""
    if size_bytes > MAX_SIZE_BYTES:
        raise UserError(f"{what} {size_bytes} bytes is larger than the 1 TiB limit; is it a typo?")


def size_sweep(min_bytes: int, max_bytes: int, step_factor: int) -> list[int]:
    """The sizes nccl-tests visits with `-b min -e max -f factor`: min, min*f, ... while <= max."""
    if min_bytes <= 0 or max_bytes <= 0:
        raise UserError("sizes must be at least 1 byte")
    check_size_cap(min_bytes, "min bytes")
    check_size_cap(max_bytes, "max bytes")
    if min_bytes > max_bytes:
        raise UserError(f"min bytes ({min_bytes}) is larger than max bytes ({max_bytes})")
    if min_bytes == max_bytes:
        return [min_bytes]
    if step_factor < 2:
        raise UserError(f"step factor must be an integer of at least 2, got {step_factor}")
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= step_factor
    return sizes


@dataclass(frozen=True)
class Counts:
    """Element counts of one op at one size, as nccl-tests' `getCollByteCount` returns them.

    `param` is the count passed to the collective and printed in the `count` column; the in-place
    offsets say where, in the larger buffer, a rank's own slice sits (multiplied by the rank).
    """

    send: int
    recv: int
    param: int
    send_inplace_offset: int
    recv_inplace_offset: int

    def size_bytes(self, elt_bytes: int) -> int:
        """nccl-tests' `size` column: max(sendBytes, expectedBytes)."""
        return max(self.send, self.recv) * elt_bytes


def per_rank_base(count: int, elt_bytes: int, nranks: int) -> int:
    """`(count/nranks) & -(16/eltSize)`: the per-rank share rounded down to a 16-byte multiple."""
    align = max(1, 16 // elt_bytes)
    return (count // nranks) & ~(align - 1)


def coll_counts(kind: str, size_bytes: int, elt_bytes: int, nranks: int) -> Counts:
    """Counts for one op kind (`same`, `gather`, `scatter`, `alltoall`) at `size_bytes`."""
    count = size_bytes // elt_bytes
    if kind == "same":
        return Counts(count, count, count, 0, 0)
    base = per_rank_base(count, elt_bytes, nranks)
    if kind == "gather":
        # all_gather and gather: send `base`, receive base*nranks; in-place sends from the rank's slot.
        return Counts(base, base * nranks, base, base, 0)
    if kind == "scatter":
        # reduce_scatter and scatter: send base*nranks, receive `base` into the rank's slot in-place.
        return Counts(base * nranks, base, base, 0, base)
    if kind == "alltoall":
        return Counts(base * nranks, base * nranks, base, 0, 0)
    raise ValueError(f"unknown count kind {kind!r}")
