"""The fitting procedure: the model's free constants fitted on the evidence set, by exhaustive grid search.

Fitted, each only from the evidence it affects:
- the large-GEMM share of peak per GPU generation and number format (`ampere:bf16`, `hopper:fp8`, ...;
  training entries); `ampere:bf16` is `gemm_efficiency_max`;
- `zero3_overlap` (ZeRO-3 entries) and `tp_comm_overlap` (entries run with TP comm overlap);
- from the inference entries alone: the serving GEMM share per generation and format
  (`infer_gemm_efficiency_by_arch`) and two costs of a serving forward pass, the same for every vendor: the
  time of a small kernel under CUDA-graph replay (`decode_kernel_us`) and, on a serial engine, the host time
  per sequence in a step (`decode_seq_host_us`: only entries run on a serial engine depend on it), each
  searched only inside its plausible range (INFER_COARSE_KERNEL_US, INFER_COARSE_HOST_US). Decode's HBM
  share is measured, not fitted (compute.yaml). A serving share no entry pins (a memory-bound row) stays near
  the training share: the loss adds INFER_SHARE_PRIOR_WEIGHT x log(share / training share)^2 per generation
  and format.
- from the memory entries that read the caching allocator's peak reserved bytes: how far reserved sits above
  what the tensors need (`reserved_over_allocated`), the mean log ratio with each source weighing the same
  (the least-squares fit of a constant ratio in log space), to RESERVED_RATIO_DECIMALS places.
Everything else is physics, framework convention or the calibration set's earlier fit (compute.yaml).

The loss is the sum of squared log errors. Each entry is priced exactly on a coarse grid of its own
constants (GEMM share as 1/share, where step time is close to linear, times the overlap or the fixed costs), and
the search runs on a fine grid interpolated from it, so a fit costs milliseconds once the coarse grid is
priced; every number reported is then an exact prediction with the fitted constants. A generation or format
no remaining entry covers keeps the calibration set's A100 share (the fallback predictions use).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from linkscope.hardware.loader import HardwareDB
from linkscope.model.step.compute import ComputeConstants, constants_override
from linkscope.model.fidelity.evidence import (
    CALIBRATION_SOURCE,
    Entry,
    EvidenceSet,
    InferenceEntry,
    MemoryEntry,
    TrainingEntry,
    equal_source_weights,
)
from linkscope.model.fidelity.evidence_predict import allocated_memory_gib, evidence_system, measured, predicted
from linkscope.model.step.transformer import model_presets

COARSE_SHARE = np.array([0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95])
COARSE_MIX = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
FINE_SHARE = np.round(np.arange(0.25, 0.951, 0.005), 3)
FINE_MIX = np.round(np.arange(0.0, 1.001, 0.02), 2)
DEFAULT_ARCH_KEY = "ampere:bf16"
CALIBRATION_WEIGHT = 10.0
OTHER_CONSTANTS = ("zero3_overlap", "tp_comm_overlap")
INFER_COARSE_KERNEL_US = np.array([1.0, 2.5, 5.0, 10.0])
"""Measured on one H200: a trivial kernel replayed in a CUDA graph takes 1.12 us (the floor, six per layer ~7 us);
a plain-PyTorch Llama-70B layer's 20 small kernels at batch 1 take 59 us (benchmarks/gpu_decode_kernels.py), as
much as six kernels at 10 us: the range runs from a fused engine at the floor to an unfused one."""
INFER_COARSE_HOST_US = np.array([0.0, 100.0, 200.0, 400.0])
"""Host time per sequence per step of a serial engine, from 0 to 400 us: vLLM V0's Python built, sampled,
detokenized and streamed every sequence of every step (for Llama 3 8B on one H100 the API server and scheduling
took 62% of the time before v0.6, vLLM blog 2024-09-05); OCI's 405B runs grow 0.17 ms per sequence per step."""
INFER_COARSE_SHARE = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.95])
INFER_FINE_SHARE = np.round(np.arange(0.1, 0.951, 0.01), 3)
INFER_FINE_KERNEL_US = np.round(np.arange(1.0, 10.001, 0.25), 2)
INFER_FINE_HOST_US = np.arange(0.0, 400.01, 10.0)
INFER_SHARE_PRIOR_WEIGHT = 0.02
RESERVED_RATIO_DECIMALS = 2


def gemm_key(entry: TrainingEntry | InferenceEntry, db: HardwareDB) -> str:
    """`arch:precision` whose GEMM share the entry's prediction depends on."""
    precision = "bf16" if entry.precision == "fp16" else entry.precision
    return f"{evidence_system(entry.system, db).node.gpu.arch}:{precision}"


def second_constant(entry: Entry) -> str | None:
    """The other fitted constant a training entry depends on, if any."""
    if not isinstance(entry, TrainingEntry):
        return None
    if entry.zero >= 3 and entry.gpus > entry.tp * entry.pp * entry.cp:
        return "zero3_overlap"
    if entry.tp_overlap and entry.tp > 1:
        return "tp_comm_overlap"
    return None


def with_values(base: ComputeConstants, shares: dict[str, float], others: dict[str, float]) -> ComputeConstants:
    """`base` with the GEMM shares (by `arch:precision`) and other fitted constants replaced."""
    by_arch = {k: v for k, v in shares.items() if k != DEFAULT_ARCH_KEY}
    update: dict[str, object] = {"gemm_efficiency_by_arch": by_arch, **others}
    if DEFAULT_ARCH_KEY in shares:
        update["gemm_efficiency_max"] = shares[DEFAULT_ARCH_KEY]
    return base.model_copy(update=update)


@dataclass
class _Priced:
    """One entry's log error on the fine grid: shape (shares,) or (shares, mixes)."""

    entry: Entry
    key: str
    other: str | None
    log_err: np.ndarray


def _log_errors(entry: Entry, db: HardwareDB, base: ComputeConstants, key: str, other: str | None) -> np.ndarray:
    mixes = COARSE_MIX
    grid = np.empty((len(COARSE_SHARE), len(mixes) if other else 1))
    for i, share in enumerate(COARSE_SHARE):
        for j, mix in enumerate(mixes if other else [0.0]):
            constants = with_values(base, {key: float(share)}, {other: float(mix)} if other else {})
            with constants_override(constants):
                grid[i, j] = np.log(predicted(entry, db) / measured(entry))
    return _interpolate(grid, mixes if other else None)


def _interpolate(grid: np.ndarray, mixes: np.ndarray | None) -> np.ndarray:
    """Coarse (share, mix) grid -> fine grid, linear in 1/share and in the mix."""
    u_coarse, u_fine = 1.0 / COARSE_SHARE[::-1], 1.0 / FINE_SHARE
    along_share = np.stack([np.interp(u_fine, u_coarse, grid[::-1, j]) for j in range(grid.shape[1])], axis=1)
    if mixes is None:
        return along_share[:, 0]
    return np.stack([np.interp(FINE_MIX, mixes, row) for row in along_share])


@dataclass
class _PricedInfer:
    """One inference entry's log error on the fine (share, kernel time, host time) grid."""

    entry: InferenceEntry
    key: str
    log_err: np.ndarray
    clock_share: float = 1.0
    """The GPU's dense-GEMM clock share (serving shares are of the datasheet peak, training shares of the peak
    at this clock)."""


def _infer_constants(base: ComputeConstants, key: str, share: float, kernel_us: float, host_us: float
                     ) -> ComputeConstants:
    return base.model_copy(update={"infer_gemm_efficiency_by_arch": {key: share}, "decode_kernel_us": kernel_us,
                                   "decode_seq_host_us": host_us})


def _infer_log_errors(entry: InferenceEntry, db: HardwareDB, base: ComputeConstants, key: str) -> np.ndarray:
    grid = np.empty((len(INFER_COARSE_SHARE), len(INFER_COARSE_KERNEL_US), len(INFER_COARSE_HOST_US)))
    for i, share in enumerate(INFER_COARSE_SHARE):
        for k, kernel in enumerate(INFER_COARSE_KERNEL_US):
            for h, host in enumerate(INFER_COARSE_HOST_US):
                with constants_override(_infer_constants(base, key, float(share), float(kernel), float(host))):
                    grid[i, k, h] = np.log(predicted(entry, db) / measured(entry))
    # Times are close to linear in 1/share, and linear in the kernel and host times.
    grid = _interp_axis(grid, 0, 1.0 / INFER_COARSE_SHARE, 1.0 / INFER_FINE_SHARE)
    grid = _interp_axis(grid, 1, INFER_COARSE_KERNEL_US, INFER_FINE_KERNEL_US)
    return _interp_axis(grid, 2, INFER_COARSE_HOST_US, INFER_FINE_HOST_US)


def _interp_axis(grid: np.ndarray, axis: int, coarse: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """Linear interpolation of `grid` along `axis` from the points `coarse` to `fine` (either order)."""
    order = np.argsort(coarse)
    moved = np.moveaxis(grid, axis, -1)[..., order]
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.stack([np.interp(fine, coarse[order], row) for row in flat])
    return np.moveaxis(out.reshape(*moved.shape[:-1], len(fine)), -1, axis)


class PricedSet:
    """Every fitted-kind entry priced once on its coarse grid; fits on any subset are then cheap."""

    def __init__(self, evidence: EvidenceSet, db: HardwareDB, base: ComputeConstants) -> None:
        self.base = base
        self.db = db
        # MoE runs do not fit the GEMM shares: their step holds terms (dispatch and combine, the MoE layers'
        # fixed time) the shares would absorb, so the shares stay what dense GEMMs show and MoE runs test the rest.
        # Runs that offloaded to host memory likewise hold a cost the step model does not price.
        self.items = [self._price(e) for e in evidence.training
                      if not model_presets()[e.model].is_moe and e.offload == "none"]
        self.infer_items = [self._price_infer(e) for e in evidence.inference]
        self.memory_items = [(e, float(np.log(e.value / allocated_memory_gib(e))))
                             for e in evidence.memory if e.figure == "reserved"]

    def _price_infer(self, entry: InferenceEntry) -> _PricedInfer:
        gpu = evidence_system(entry.system, self.db).node.gpu
        key = gemm_key(entry, self.db)
        return _PricedInfer(entry, key, _infer_log_errors(entry, self.db, self.base, key),
                            self.base.dense_clock_share(gpu.family, entry.precision))

    def _price(self, entry: TrainingEntry) -> _Priced:
        key, other = gemm_key(entry, self.db), second_constant(entry)
        return _Priced(entry, key, other, _log_errors(entry, self.db, self.base, key, other))

    def fit(self, keep: Callable[[Entry], bool] = lambda e: True) -> ComputeConstants:
        """Constants fitted on the entries `keep` accepts."""
        items = [p for p in self.items if keep(p.entry)]
        shares, fitted = _fit_training(items)
        shares.setdefault(DEFAULT_ARCH_KEY, self.base.priors["gemm_efficiency_max"])
        infer_shares: dict[str, float] = {}
        kernel_us = self.base.priors.get("decode_kernel_us", self.base.decode_kernel_us)
        host_us = self.base.priors.get("decode_seq_host_us", self.base.decode_seq_host_us)
        inference = [p for p in self.infer_items if keep(p.entry)]
        if inference:
            trained = with_values(self.base, shares, {})
            infer_shares, kernel_us, host_us = _fit_inference(inference, trained)
        others = {name: fitted.get(name, self.base.priors.get(name, getattr(self.base, name)))
                  for name in OTHER_CONSTANTS}
        reserved = _fit_reserved([(e, r) for e, r in self.memory_items if keep(e)],
                                 self.base.priors.get("reserved_over_allocated", 1.0))
        return with_values(self.base, shares, others).model_copy(
            update={"infer_gemm_efficiency_by_arch": infer_shares, "decode_kernel_us": kernel_us,
                    "decode_seq_host_us": host_us, "reserved_over_allocated": reserved})


def _fit_reserved(items: list[tuple[MemoryEntry, float]], prior: float) -> float:
    """The reserved-over-allocated ratio: exp of the source-weighted mean log ratio, at least 1 (the allocator
    never reserves less than it hands out); `prior` where no entry read reserved bytes."""
    if not items:
        return prior
    weights = equal_source_weights([e.source for e, _ in items])
    mean_log = float(np.average([r for _, r in items], weights=weights))
    return max(1.0, round(float(np.exp(mean_log)), RESERVED_RATIO_DECIMALS))


def _fit_inference(items: list[_PricedInfer], trained: ComputeConstants) -> tuple[dict[str, float], float, float]:
    """Exhaustive search: the (kernel time, host time) pair with the least loss, each with the best serving
    share per generation and format."""
    weight: dict[str, float] = {}
    for p in items:
        weight[p.entry.source] = weight.get(p.entry.source, 0.0) + 1.0
    fixed_shape = (len(INFER_FINE_KERNEL_US), len(INFER_FINE_HOST_US))
    total = np.zeros(fixed_shape)
    best_share: dict[str, np.ndarray] = {}
    for key in sorted({p.key for p in items}):
        arch, fmt = key.split(":")
        group = [p for p in items if p.key == key]
        # The training share is of the peak at the dense-GEMM clock; the serving share of the datasheet peak.
        training = trained.gemm_max(arch, fmt) * float(np.mean([p.clock_share for p in group]))
        prior = np.log(INFER_FINE_SHARE / training) ** 2 * INFER_SHARE_PRIOR_WEIGHT
        loss = np.broadcast_to(prior[:, None, None], (len(INFER_FINE_SHARE), *fixed_shape)).copy()
        for p in group:
            loss += p.log_err ** 2 / weight[p.entry.source]
        best_share[key] = np.argmin(loss, axis=0)
        total += np.min(loss, axis=0)
    kernel, host = (int(i) for i in np.unravel_index(int(np.argmin(total)), total.shape))
    shares = {key: float(INFER_FINE_SHARE[idx[kernel, host]]) for key, idx in best_share.items()}
    return shares, float(INFER_FINE_KERNEL_US[kernel]), float(INFER_FINE_HOST_US[host])


def _fit_training(items: list[_Priced]) -> tuple[dict[str, float], dict[str, float]]:
    """Exhaustive search: every (zero3_overlap, tp_comm_overlap) pair, the best share per key for each."""
    keys = sorted({p.key for p in items})
    weight = _source_weights(items)
    n_mix = len(FINE_MIX)
    total = np.zeros((n_mix, n_mix))
    best_share: dict[str, np.ndarray] = {}
    for key in keys:
        loss = np.zeros((len(FINE_SHARE), n_mix, n_mix))
        for p in (p for p in items if p.key == key):
            sq = weight[p.entry.source] * p.log_err ** 2
            if p.other == "zero3_overlap":
                loss += sq[:, :, None]
            elif p.other == "tp_comm_overlap":
                loss += sq[:, None, :]
            else:
                loss += sq[:, None, None]
        best_share[key] = np.argmin(loss, axis=0)
        total += np.min(loss, axis=0)
    z_idx, t_idx = np.unravel_index(np.argmin(total), total.shape) if keys else (n_mix - 1, n_mix - 1)
    shares = {key: float(FINE_SHARE[best_share[key][z_idx, t_idx]]) for key in keys}
    others: dict[str, float] = {}
    if any(p.other == "zero3_overlap" for p in items):
        others["zero3_overlap"] = float(FINE_MIX[z_idx])
    if any(p.other == "tp_comm_overlap" for p in items):
        others["tp_comm_overlap"] = float(FINE_MIX[t_idx])
    return shares, others


def _source_weights(items: list[_Priced]) -> dict[str, float]:
    """1 / (the source's entries): each publication weighs the same, whatever its number of rows. The
    calibration set weighs CALIBRATION_WEIGHT publications: it is the one source whose every configuration
    detail is known, and it must stay within 3%."""
    counts: dict[str, int] = {}
    for p in items:
        counts[p.entry.source] = counts.get(p.entry.source, 0) + 1
    return {source: (CALIBRATION_WEIGHT if source == CALIBRATION_SOURCE else 1.0) / n
            for source, n in counts.items()}


class HasSource(Protocol):
    """An evidence entry, or a result that names its entry's source."""

    @property
    def source(self) -> str:
        """The source's id."""
        ...


def sources_of(entries: Iterable[HasSource]) -> list[str]:
    """Distinct sources in order of first appearance."""
    return list(dict.fromkeys(e.source for e in entries))
