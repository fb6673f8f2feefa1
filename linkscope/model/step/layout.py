"""Parallel layouts as arrays, and where each parallel group lands on the nodes.

By default ranks are ordered as Megatron-LM orders them (tp fastest, then cp, then dp, then pp), so a group of
size k has stride 1 (tp), tp (cp), tp*cp (dp) or tp*cp*dp (pp). Groups that fit in a node stay in it. Another
rank order (Megatron-Core's `order`, what `plan` chooses) moves groups across nodes: `order_spans` says where
each lands under any order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

import numpy as np

Recompute = Literal["none", "selective", "full"]
RECOMPUTE: tuple[Recompute, ...] = ("none", "selective", "full")
DIMS = ("tp", "cp", "dp", "pp")
"""The parallel dimensions, fastest-varying first in Megatron-LM's rank order."""
MEGATRON_ORDER: tuple[str, ...] = DIMS
"""Megatron-Core's default rank order (fastest-varying first), the one the step model assumes unless told."""
GROUPS = ("tp", "cp", "pp", "dp", "ep", "edp")
"""The communication groups of a training step: tensor, context, pipeline (a pair of neighbouring stages), data
(the weight replicas, dp x cp), expert and expert data parallel."""


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
    ep: int = 1
    """Expert parallelism: MoE layers fold their experts over ep x etp of the tp x cp x dp ranks (Megatron-Core's
    MoE parallel folding); the rest of those ranks (edp) replicate each expert."""
    etp: int = 1
    """Expert tensor parallelism: each expert's matrices split over etp ranks."""

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "cp", "interleave", "micro_batch", "ep", "etp"):
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
    ep: np.ndarray
    """Expert-parallel ranks of the MoE layers (1 for a dense model)."""
    etp: np.ndarray
    """Expert tensor-parallel ranks."""

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
                      sequence_parallel=bool(self.sp[i]), ep=int(self.ep[i]), etp=int(self.etp[i]))


def single_layout(tp: int, pp: int, dp: int, cp: int = 1, v: int = 1, mb: int = 1, recompute: str = "none",
                  zero: int = 0, sp: bool = False, ep: int = 1, etp: int = 1) -> Layouts:
    """One layout as a Layouts of length one."""
    values = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "v": v, "mb": mb, "recompute": RECOMPUTE.index(recompute),
              "zero": zero, "sp": sp, "ep": ep, "etp": etp}
    return Layouts(**{name: np.asarray([value]) for name, value in values.items()})


def layouts_of(layout: Layout) -> Layouts:
    """A Layout as a Layouts of length one, for the vectorized step model."""
    return single_layout(layout.tp, layout.pp, layout.dp, layout.cp, layout.interleave, layout.micro_batch,
                         layout.recompute, layout.zero, layout.sequence_parallel, layout.ep, layout.etp)


def group_span(size: np.ndarray, stride: np.ndarray, gpus_per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs of the group per node, nodes the group spans) for a group of `size` ranks `stride` apart."""
    size = np.asarray(size, dtype=float)
    stride = np.asarray(stride, dtype=float)
    within = size * stride <= gpus_per_node
    per_node = np.where(within, size, np.where(stride >= gpus_per_node, 1.0, np.floor(gpus_per_node / stride)))
    per_node = np.clip(per_node, 1.0, size)
    return per_node, np.maximum(size / per_node, 1.0)


Digit = tuple[np.ndarray, bool]
"""One digit of a rank number, fastest first: its size (per layout) and whether the group varies along it."""


def _digits(lay: Layouts, order: tuple[str, ...], group: str) -> list[Digit]:
    """The rank number as digits, fastest first, with `group`'s marked. A pipeline stage's other ranks (tp x cp x
    dp, in `order`) are numbered as one index, and the experts fold into that index etp fastest, then ep, then edp
    (Megatron-Core's MoE parallel folding); the pipeline digit sits inside that index where `order` puts it."""
    sizes = {"tp": lay.tp, "cp": lay.cp, "dp": lay.dp, "pp": lay.pp}
    members = {"tp": ("tp",), "cp": ("cp",), "dp": ("dp", "cp")}.get(group, ())
    if group in ("ep", "edp"):
        edp = np.maximum(lay.tp * lay.cp * lay.dp // (lay.ep * lay.etp), 1)
        fold: list[Digit] = [(lay.etp, False), (lay.ep, group == "ep"), (edp, group == "edp")]
    else:
        fold = [(sizes[d], d in members) for d in order if d != "pp"]
    stage: Digit = (np.full(len(lay), 2.0) if group == "pp" else lay.pp, group == "pp")
    at = order.index("pp")
    if at in (0, len(order) - 1):
        return [stage, *fold] if at == 0 else [*fold, stage]
    below_pp = np.prod([sizes[d] for d in order[:at]], axis=0)
    inner: list[Digit] = []
    outer: list[Digit] = []
    low = np.ones(len(lay))
    for size, member in fold:
        # The part of this digit below the pipeline digit, and the part above it.
        below = np.clip(below_pp / low, 1.0, size)
        inner.append((below, member))
        outer.append((size / below, member))
        low = low * size
    return [*inner, stage, *outer]


def _merged(digits: list[Digit]) -> list[Digit]:
    """Neighbouring digits of the same kind as one (a group over dp x cp next to each other is one block)."""
    out: list[Digit] = []
    for size, member in digits:
        if out and out[-1][1] == member:
            out[-1] = (out[-1][0] * size, member)
        else:
            out.append((np.asarray(size, dtype=float), member))
    return out


def order_spans(lay: Layouts, gpus_per_node: int, order: tuple[str, ...] = MEGATRON_ORDER,
                groups: tuple[str, ...] = GROUPS) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per group (of GROUPS), (its ranks on one node, the nodes it spans) under rank `order`, as `group_span`
    gives them for Megatron's order: ranks are numbered node-major, and a group's ranks fill a node as far as
    the digits below and between them leave room."""
    spans = {}
    for group in groups:
        room = np.full(len(lay), float(gpus_per_node))
        per_node = np.ones(len(lay))
        size = np.ones(len(lay))
        for digit, member in _merged(_digits(lay, order, group)):
            if member:
                per_node = per_node * np.where(room >= digit, digit, np.maximum(np.floor(room), 1.0))
                size = size * digit
            room = room / digit
        per_node = np.clip(per_node, 1.0, size)
        spans[group] = (per_node, np.maximum(size / per_node, 1.0))
    return spans
