"""Parallel layouts as arrays, and where each parallel group lands on the nodes.

Ranks are ordered as Megatron-LM orders them (tp fastest, then cp, then dp, then pp), so a group of size k
has stride 1 (tp), tp (cp), tp*cp (dp) or tp*cp*dp (pp). Groups that fit in a node stay in it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

RECOMPUTE = ("none", "selective", "full")


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

    def row(self, i: int) -> dict[str, object]:
        """One layout as plain Python values."""
        return {
            "tp": int(self.tp[i]), "pp": int(self.pp[i]), "dp": int(self.dp[i]), "cp": int(self.cp[i]),
            "interleave": int(self.v[i]), "micro_batch": int(self.mb[i]),
            "recompute": RECOMPUTE[int(self.recompute[i])], "zero": int(self.zero[i]),
            "sequence_parallel": bool(self.sp[i]),
        }


def single_layout(tp: int, pp: int, dp: int, cp: int = 1, v: int = 1, mb: int = 1, recompute: str = "none",
                  zero: int = 0, sp: bool = False) -> Layouts:
    """One layout as a Layouts of length one."""
    arr = lambda x: np.asarray([x])  # noqa: E731
    return Layouts(tp=arr(tp), pp=arr(pp), dp=arr(dp), cp=arr(cp), v=arr(v), mb=arr(mb),
                   recompute=arr(RECOMPUTE.index(recompute)), zero=arr(zero), sp=arr(sp))


def group_span(size: np.ndarray, stride: np.ndarray, gpus_per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs of the group per node, nodes the group spans) for a group of `size` ranks `stride` apart."""
    size = np.asarray(size, dtype=float)
    stride = np.asarray(stride, dtype=float)
    within = size * stride <= gpus_per_node
    per_node = np.where(within, size, np.where(stride >= gpus_per_node, 1.0, np.floor(gpus_per_node / stride)))
    per_node = np.clip(per_node, 1.0, size)
    return per_node, np.maximum(size / per_node, 1.0)
