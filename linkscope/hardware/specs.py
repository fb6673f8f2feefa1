"""Datasheet facts: GPUs and link generations. Plain frozen dataclasses, built by `loader` from data files."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Literal

LinkFamily = Literal["nvlink", "infinity-fabric", "pcie", "infiniband", "roce", "efa", "tcp"]
LinkUnit = Literal["per-gpu", "per-x16", "per-port"]


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model as its datasheet describes it. Dense tensor TFLOPS, never the 2:4-sparse figure."""

    id: str
    vendor: str
    arch: str
    form_factor: str
    memory_gib: float
    hbm_gb_per_s: float
    fp16_dense_tflops: float
    bf16_dense_tflops: float | None
    fp8_dense_tflops: float | None
    scale_up_link: str | None
    """Link generation id of the GPU's own scale-up port (`nvlink4`), None for PCIe-only GPUs."""
    nvlink_links: int | None
    pcie: str
    """Host link generation id (`pcie5`)."""
    compute_capability: str | None
    source: str
    as_of: date
    aliases: tuple[str, ...] = field(default=())
    family: str = ""
    """The product line a buyer names (`A100` for SXM4 and PCIe, 40 and 80 GB); empty means the id alone."""

    @property
    def family_name(self) -> str:
        """The family, or the id for a GPU that has none of its own."""
        return self.family or self.id

    def dense_tflops(self, precision: str) -> float:
        """Peak dense tensor TFLOPS for `bf16`, `fp16` or `fp8`; falls back to FP16 where BF16 is absent (V100)."""
        if precision == "fp8":
            if self.fp8_dense_tflops is None:
                raise ValueError(f"{self.id} has no FP8 tensor cores")
            return self.fp8_dense_tflops
        if precision == "bf16" and self.bf16_dense_tflops is not None:
            return self.bf16_dense_tflops
        return self.fp16_dense_tflops


@dataclass(frozen=True)
class LinkSpec:
    """One link generation: NVLink 4, PCIe Gen5, InfiniBand NDR, ...

    `bw_gb_per_s` is per direction, for the unit named by `unit`: the whole GPU for NVLink,
    an x16 slot for PCIe, one port for network fabrics. None where the rate depends on the deployment
    (RoCE, EFA and TCP come at many speeds).
    """

    id: str
    family: LinkFamily
    generation: str
    unit: LinkUnit
    bw_gb_per_s: float | None
    per_link_gb_per_s: float | None
    links_per_gpu: int | None
    source: str
    as_of: date
    name: str = ""

    @property
    def gbit_per_s(self) -> float | None:
        """The per-direction rate in Gbit/s (10^9 bits), the unit network ports are sold in."""
        return None if self.bw_gb_per_s is None else self.bw_gb_per_s * 8.0


def host_cpu_spec(cpu_model: str | None, memory_gib: float | None) -> GpuSpec:
    """The device of a machine without GPUs: its CPU, where linkscope's CPU ranks (gloo) run.

    Tensor TFLOPS and HBM bandwidth are 0: a CPU host is measured and calibrated, never modelled.
    """
    return GpuSpec(id="CPU", vendor="cpu", arch="cpu", form_factor="Host", memory_gib=memory_gib or 0.0,
                   hbm_gb_per_s=0.0, fp16_dense_tflops=0.0, bf16_dense_tflops=None, fp8_dense_tflops=None,
                   scale_up_link=None, nvlink_links=None, pcie="pcie4", compute_capability=None,
                   source=f"probe of this host ({cpu_model or 'CPU model unknown'})", as_of=date.today())
