"""Parallel layouts as arrays, and where each parallel group lands on the nodes.

Ranks are ordered as Megatron-LM orders them (tp fastest, then cp, then dp, then pp), so a group of size k
has stride 1 (tp), tp (cp), tp*cp (dp) or tp*cp*dp (pp). Groups that fit in a node stay in it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import numpy as np

Recompute = Literal["none", "selective", "full"]
RECOMPUTE: tuple[Recompute, ...] = ("none", "selective", "full")
DIMS = ("tp", "cp", "dp", "pp")
"""The parallel dimensions, fastest-varying first in Megatron-LM's rank order."""


@dataclass(frozen=True)
class Layout:
    """One training layout, the one type every command passes around (as torchtitan's ParallelDims does).

    Validated when made, so a Layout that exists can run: every degree at least 1, a known recomputation,
    ZeRO stage 0-3. `as_dict()` is its JSON form (the `parallelism` object of `--json`).
    """

    tp: int
    pp: int
    dp: int
    cp: int = 1
    interleave: int = 1
    """Interleaved pipeline chunks per stage (1 = plain 1F1B)."""
    micro_batch: int = 1
    recompute: str = "none"
    zero: int = 0
    sequence_parallel: bool = False

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "cp", "interleave", "micro_batch"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)} (got {self.recompute!r})")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be 0, 1, 2 or 3 (got {self.zero})")

    @property
    def world(self) -> int:
        """Ranks the layout needs: tp x pp x dp x cp."""
        return self.tp * self.pp * self.dp * self.cp

    def degree(self, dim: str) -> int:
        """The size of `dim` (tp, cp, dp or pp)."""
        return int(getattr(self, dim))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass
class Layouts:
    """Candidate layouts, one element per candidate (all arrays of one length)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    v: np.ndarray
    """Interleaved pipeline chunks per stage (1 = plain 1F1B)."""
    mb: np.ndarray
    """Micro-batch size in sequences."""
    recompute: np.ndarray
    """Index into RECOMPUTE."""
    zero: np.ndarray
    sp: np.ndarray
    """Sequence parallelism (bool)."""

    def __len__(self) -> int:
        return len(self.tp)

    def take(self, idx: np.ndarray | int) -> Layouts:
        """The layouts at `idx`."""
        idx = np.atleast_1d(idx)
        return Layouts(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def row(self, i: int) -> Layout:
        """Candidate `i` as one Layout."""
        return Layout(tp=int(self.tp[i]), pp=int(self.pp[i]), dp=int(self.dp[i]), cp=int(self.cp[i]),
                      interleave=int(self.v[i]), micro_batch=int(self.mb[i]),
                      recompute=RECOMPUTE[int(self.recompute[i])], zero=int(self.zero[i]),
                      sequence_parallel=bool(self.sp[i]))


def single_layout(tp: int, pp: int, dp: int, cp: int = 1, v: int = 1, mb: int = 1, recompute: str = "none",
                  zero: int = 0, sp: bool = False) -> Layouts:
    """One layout as a Layouts of length one."""
    values = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "v": v, "mb": mb, "recompute": RECOMPUTE.index(recompute),
              "zero": zero, "sp": sp}
    return Layouts(**{name: np.asarray([value]) for name, value in values.items()})


def layouts_of(layout: Layout) -> Layouts:
    """A Layout as a Layouts of length one, for the vectorized step model."""
    return single_layout(layout.tp, layout.pp, layout.dp, layout.cp, layout.interleave, layout.micro_batch,
                         layout.recompute, layout.zero, layout.sequence_parallel)


def group_span(size: np.ndarray, stride: np.ndarray, gpus_per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs of the group per node, nodes the group spans) for a group of `size` ranks `stride` apart."""
    size = np.asarray(size, dtype=float)
    stride = np.asarray(stride, dtype=float)
    within = size * stride <= gpus_per_node
    per_node = np.where(within, size, np.where(stride >= gpus_per_node, 1.0, np.floor(gpus_per_node / stride)))
    per_node = np.clip(per_node, 1.0, size)
    return per_node, np.maximum(size / per_node, 1.0)
