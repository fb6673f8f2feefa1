"""Exactly predictable check data, like nccl-tests' verifiable routines.

Every rank's input is a function of (rank, element index, seed): small integers chosen per reduction
operator so that every partial result stays exactly representable in the element type. The expected
output is therefore exact whatever order or tree the library reduces in, and the check compares with
`==`, not a tolerance. Expected values are accumulated exactly (int64 or float64), then cast.

Schemes, with L the type's exact-integer limit and n the rank count:
- sum: values in [0, L // n]; with more ranks than L, only L ranks per element contribute (0/1).
- prod: values 1 or 2 on at most `prod_exp_limit` ranks per element, 1 elsewhere: results are 2**k.
- min, max, non-reducing ops: values in [0, min(100, L)].
- avg: h(i) + e on even ranks and h(i) - e on the next odd rank, so the sum is exactly n * h(i) and
  the average is h(i). With more than L / 2 ranks the type cannot hold such sums and every value is 0.
"""

from __future__ import annotations

import torch

from linkscope.bench.dtypes import DType
from linkscope.bench.sizes import Counts

_PRIME = 65521
"""Period of the element pattern: values repeat every _PRIME elements, so large buffers are tiled from
one computed period (the check stays cheap next to the collective it checks)."""
_SPREAD = 100


def _tile(period: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """Elements [start, start + count) of the infinite repetition of `period`."""
    length = period.numel()
    offset = start % length
    reps = -(-(offset + count) // length)
    return period.repeat(reps)[offset : offset + count]


class CheckData:
    """The inputs and reductions of one check iteration (one seed) for n ranks."""

    def __init__(self, world: int, redop: str, dtype: DType, seed: int, device: torch.device) -> None:
        self.world = world
        self.redop = redop
        self.dtype = dtype
        self.seed = seed
        self.device = device
        self._exact = torch.float64 if dtype.is_float else torch.int64
        self._torch_dtype = getattr(torch, dtype.torch_name)

    def _hash(self, salt: int, idx: torch.Tensor) -> torch.Tensor:
        return (idx * 40503 + salt * 7919 + self.seed * 104729 + 12345) % _PRIME

    def _index(self, start: int, count: int) -> torch.Tensor:
        return torch.arange(start, start + count, dtype=torch.int64, device=self.device)

    def _contributors(self) -> int:
        """Ranks contributing to each element: all of them unless the type's range forbids it."""
        if self.redop == "sum":
            return min(self.world, self.dtype.exact_int_limit)
        if self.redop == "prod":
            return min(self.world, self.dtype.prod_exp_limit)
        return self.world

    def _exact_values(self, rank: int, idx: torch.Tensor) -> torch.Tensor:
        """Rank `rank`'s values at element indices `idx`, as exact int64."""
        limit = self.dtype.exact_int_limit
        m = self._contributors()
        # Rank r contributes to element i when (r - i) mod n < m: exactly m ranks per element.
        active = ((rank - idx) % self.world) < m if m < self.world else True
        if self.redop == "sum":
            return (self._hash(rank, idx) % (max(1, min(_SPREAD, limit // m)) + 1)) * active
        if self.redop == "prod":
            return 1 + (self._hash(rank, idx) % 2) * active
        if self.redop == "avg":
            return self._avg_values(rank, idx)
        return self._hash(rank, idx) % (min(_SPREAD, limit) + 1)

    def _avg_base(self, idx: torch.Tensor) -> torch.Tensor | None:
        spread = self.dtype.exact_int_limit // (2 * self.world)
        if spread < 1:
            return None
        return self._hash(-1, idx) % (spread + 1)

    def _avg_values(self, rank: int, idx: torch.Tensor) -> torch.Tensor:
        base = self._avg_base(idx)
        if base is None:
            return torch.zeros_like(idx)
        # Pairs (2k, 2k+1) add +e and -e around the base, so they cancel in the sum.
        delta = self._hash(-2 - rank // 2, idx) % (base + 1)
        if rank % 2 == 1:
            return base - delta
        return base + delta if rank + 1 < self.world else base

    def _periodic(self) -> bool:
        # With fewer contributors than ranks the pattern also repeats every n elements; compute it whole.
        return self._contributors() == self.world

    def values(self, rank: int, start: int, count: int) -> torch.Tensor:
        """Rank `rank`'s input for global elements [start, start + count), in the element type."""
        if not self._periodic():
            return self._exact_values(rank, self._index(start, count)).to(self._torch_dtype)
        period = self._exact_values(rank, self._index(0, _PRIME)).to(self._torch_dtype)
        return _tile(period, start, count)

    def reduced(self, start: int, count: int) -> torch.Tensor:
        """The reduction over all ranks of elements [start, start + count), in the element type."""
        periodic = self._periodic()
        idx = self._index(0, _PRIME) if periodic else self._index(start, count)
        if self.redop == "avg":
            base = self._avg_base(idx)
            acc = torch.zeros_like(idx) if base is None else base
        else:
            acc = self._exact_values(0, idx).to(self._exact)
            for rank in range(1, self.world):
                acc = _combine(self.redop, acc, self._exact_values(rank, idx).to(self._exact))
        acc = acc.to(self._torch_dtype)
        return _tile(acc, start, count) if periodic else acc


def _combine(redop: str, acc: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    if redop == "sum":
        return acc + vals
    if redop == "prod":
        return acc * vals
    if redop == "min":
        return torch.minimum(acc, vals)
    if redop == "max":
        return torch.maximum(acc, vals)
    raise ValueError(f"no reduction for {redop!r}")


def input_values(op: str, rank: int, counts: Counts, data: CheckData) -> torch.Tensor:
    """What rank `rank` feeds op `op` in a check: its values for every element of its input."""
    n = data.world
    length = counts.param * n if op in ("reduce_scatter", "all_to_all", "scatter") else counts.param
    return data.values(rank, 0, length)


def expected_output(op: str, rank: int, root: int, counts: Counts, data: CheckData) -> torch.Tensor:
    """What the op must leave in this rank's output buffer (exact values)."""
    n, base = data.world, counts.param
    if op in ("all_reduce", "reduce"):
        return data.reduced(0, base)
    if op == "reduce_scatter":
        return data.reduced(rank * base, base)
    if op == "broadcast":
        return data.values(root, 0, base)
    if op in ("all_gather", "gather"):
        return torch.cat([data.values(r, 0, base) for r in range(n)])
    if op == "all_to_all":
        return torch.cat([data.values(r, rank * base, base) for r in range(n)])
    if op == "scatter":
        return data.values(root, rank * base, base)
    if op == "sendrecv":
        return data.values((rank - 1) % n, 0, base)
    raise ValueError(f"no expectation for {op!r}")


def count_wrong(actual: torch.Tensor, expected: torch.Tensor) -> int:
    """Elements of `actual` that differ from the `expected` values (cast to actual's type if needed)."""
    if actual.numel() != expected.numel():
        raise ValueError(f"output has {actual.numel()} elements, expected {expected.numel()}")
    if expected.dtype != actual.dtype or expected.device != actual.device:
        expected = expected.to(device=actual.device, dtype=actual.dtype)
    return int(torch.count_nonzero(actual != expected).item())
