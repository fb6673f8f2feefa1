"""The model's physical constants: NCCL's tuning tables and per-fabric differences, loaded and validated once."""

from __future__ import annotations

import functools
import math
from contextlib import AbstractContextManager
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from linkscope.hardware import built_cache
from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import parse_yaml
from linkscope.model.in_force import InForce

DATA_DIR = Path(__file__).parents[1] / "data"

PROTOCOLS = ("LL", "LL128", "Simple")
ARCHS = ("volta", "ampere", "hopper", "blackwell")

Triple = tuple[float, float, float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class NcclTuning(_Strict):
    """NCCL's cost-model constants (see data/nccl.yaml for their source)."""

    source: str
    as_of: date
    base_latency_us: dict[str, Triple]
    hw_latency_us: dict[str, dict[str, Triple]]
    net_overhead_us: dict[str, float]
    ll_max_bw: dict[str, Triple]
    per_channel_max_ring_ll128_bw: dict[str, Triple]
    per_channel_max_tree_bw: dict[str, Triple]
    per_channel_max_tree_ll128_bw: dict[str, Triple]
    per_channel_max_nvls_tree_bw: dict[str, Triple]
    nvls_efficiency: dict[str, float]
    nvlink_per_link_bw: dict[str, float]
    nvlink_datasheet_per_link_bw: dict[str, float]
    xgmi_per_link_bw: dict[str, float] = {}
    """RCCL's planning bandwidth of one xGMI link, per GPU architecture (RCCL src/graph/topo.h)."""
    xgmi_datasheet_per_link_bw: dict[str, float] = {}
    pcie_x16_bw: dict[str, float]
    inter_socket_bw: dict[str, float]
    nvls_channels: dict[str, int]
    nvls_chunk_bytes: int = Field(gt=0)
    tree_correction: list[list[float]]
    ll128_efficiency: float = Field(gt=0, le=1)
    tree_efficiency: float = Field(gt=0, le=1)
    tree_pattern_factor: float = Field(gt=0, le=1)
    ring_plateau_latency_factor: dict[str, float]
    thread_threshold: Triple
    max_threads: Triple
    coll_channels: int = Field(ge=1)


class CommFit(_Strict):
    """The collective model's fitted constants (data/comm_fit.yaml)."""

    source: str
    as_of: date
    nvls_chunk_overhead_us: float = Field(ge=0)
    prior_nvls_chunk_overhead_us: float = Field(ge=0)
    nvls_sync_us: float = Field(ge=0)
    """What one single-node NVLS all-reduce costs beyond NCCL's 25 us before its first byte moves."""
    prior_nvls_sync_us: float = Field(ge=0)
    nccl_call_host_us: float = Field(default=5.0, gt=0)
    """Host time one thread spends issuing one NCCL collective on one GPU (enqueue and kernel launch)."""
    prior_nccl_call_host_us: float = Field(default=5.0, gt=0)
    ampere_nvlink_hop_scale: float = Field(default=1.0, ge=1.0)
    """The time one ring step takes to hand its data to the next A100 over NVLink3 and the second-generation
    NVSwitch, as a multiple of NCCL's per-hop latency (hwLat NVLINK RING, per protocol)."""
    prior_ampere_nvlink_hop_scale: float = Field(default=1.0, ge=1.0)
    ampere_ll_share: float = Field(default=1.0, gt=0, le=1.0)
    """The share of NCCL's LL bandwidth cap (llMaxBw) a ring reaches between A100s."""
    prior_ampere_ll_share: float = Field(default=1.0, gt=0, le=1.0)
    efa_latency_us_extra: float = Field(default=0.0, ge=0)
    """What one message costs at an EFA NET hop beyond InfiniBand verbs (fabrics.yaml names it `fitted`)."""
    prior_efa_latency_us_extra: float = Field(default=0.0, ge=0)


class FabricTraits(_Strict):
    """How one scale-out fabric differs from InfiniBand."""

    bw_efficiency: float = Field(gt=0, le=1)
    latency_us_extra: float | Literal["fitted"]
    """Time one message spends in the fabric's software path at each NET hop beyond InfiniBand verbs (a send
    posted by NCCL's proxy until the peer's proxy sees it complete); `fitted`: the collective fit's constant
    (comm_fit.yaml `<fabric>_latency_us_extra`)."""
    simple_flush: bool = False
    """The Simple protocol pays `latency_us_extra` twice per NET hop: after data lands in GPU memory the
    receiving proxy flushes it with one more network operation (NCCL's tuning model adds the net latency a
    second time for Simple; aws-ofi-nccl marks EFA platforms net_flush_required)."""
    net_protocols: list[Literal["LL", "LL128", "Simple"]] | None = None
    """The protocols NCCL runs across nodes on this fabric's standard setup (its NCCL_PROTO); None: all three."""
    max_gb_per_s_per_nic: float | None = Field(default=None, gt=0)
    """What one NIC carries at most whatever its line rate (NCCL's socket transport is bound by the host, not the
    wire); None: the line rate times `bw_efficiency`."""
    basis: str


FITTED_NET_LATENCY = ("efa",)
"""Fabrics whose per-hop cost the collective fit owns (comm_fit.yaml), so validate's folds refit it."""


class FabricTable(_Strict):
    fabrics: dict[str, FabricTraits]

    @field_validator("fabrics")
    @classmethod
    def _fitted_latency_has_a_constant(cls, fabrics: dict[str, FabricTraits]) -> dict[str, FabricTraits]:
        for name, traits in fabrics.items():
            extra = traits.latency_us_extra
            if isinstance(extra, float) and not (math.isfinite(extra) and extra >= 0):
                raise ValueError(f"{name}: latency_us_extra must be a finite number >= 0 (got {extra})")
            if traits.latency_us_extra == "fitted" and name not in FITTED_NET_LATENCY:
                raise ValueError(f"{name}: latency_us_extra 'fitted' has no fitted constant (only "
                                 f"{', '.join(FITTED_NET_LATENCY)})")
        return fabrics


def _load(path: Path, model: type[BaseModel]) -> Any:
    return built_cache.cached(path.stem, [path], (Path(__file__),), lambda: _validated(path, model))


def _validated(path: Path, model: type[BaseModel]) -> Any:
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8"))
        return model.model_validate(raw)
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(str(path), f"cannot read model constants ({exc})") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(path), err["msg"], field=".".join(map(str, err["loc"]))) from None


@functools.cache
def nccl_tuning() -> NcclTuning:
    """NCCL's tuning constants, loaded once."""
    return _load(DATA_DIR / "nccl.yaml", NcclTuning)


@functools.cache
def packaged_comm_fit() -> CommFit:
    """The fitted constants as packaged, loaded once."""
    return _load(DATA_DIR / "comm_fit.yaml", CommFit)


_COMM_FIT = InForce(packaged_comm_fit)


def comm_fit() -> CommFit:
    """The fitted constants in force: an override (a fit being evaluated) or the packaged ones."""
    return _COMM_FIT.get()


def comm_fit_override(fit: CommFit) -> AbstractContextManager[None]:
    """Predict collectives with `fit` inside the block (leave-one-source-out folds, the fitting grid)."""
    return _COMM_FIT.override(fit)


def with_nvls_fit(overhead_us: float, sync_us: float, call_host_us: float | None = None,
                  ampere: tuple[float, float] | None = None, efa_us: float | None = None) -> CommFit:
    """The packaged fit with another NVLS per-chunk overhead and single-node synchronisation cost (and, when
    given, another host time per NCCL call, another A100 ring pair: NVLink hop scale, LL share, and another
    per-hop EFA cost)."""
    packaged = packaged_comm_fit()
    hop, ll = (packaged.ampere_nvlink_hop_scale, packaged.ampere_ll_share) if ampere is None else ampere
    return packaged.model_copy(update={
        "nvls_chunk_overhead_us": float(overhead_us), "nvls_sync_us": float(sync_us),
        "nccl_call_host_us": packaged.nccl_call_host_us if call_host_us is None else float(call_host_us),
        "ampere_nvlink_hop_scale": float(hop), "ampere_ll_share": float(ll),
        "efa_latency_us_extra": packaged.efa_latency_us_extra if efa_us is None else float(efa_us)})


@functools.cache
def fabric_traits() -> dict[str, FabricTraits]:
    """Per-fabric bandwidth efficiency and extra latency, loaded once."""
    return _load(DATA_DIR / "fabrics.yaml", FabricTable).fabrics


def arch_key(arch: str) -> str:
    """Map a GPU architecture onto NCCL's four tables (Ada and CDNA take the nearest generation's values)."""
    return {"ada": "ampere", "cdna3": "hopper", "rubin": "blackwell"}.get(arch, arch if arch in ARCHS else "hopper")
