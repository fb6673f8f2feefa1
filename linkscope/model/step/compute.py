"""Per-GPU kernel times: GEMMs at a size-dependent share of peak, element-wise kernels at a share of HBM.

Vectorized: every argument may be a numpy array (one element per candidate layout).
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware import built_cache
from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import parse_yaml
from linkscope.hardware.specs import GpuSpec
from linkscope.model.in_force import InForce

COMPUTE_FILE = Path(__file__).parents[1] / "data" / "compute.yaml"
PRECISIONS = ("bf16", "fp16", "fp8")
"""Formats the GEMMs of a job may run in; the one list every command and model checks against."""
ENGINES = ("overlapped", "serial")
"""How a serving engine's host loop meets its GPU steps; the one list every command and model checks against.
`overlapped` prepares step n+1 (scheduling, input preparation, sampling, detokenizing, streaming) while the GPU
runs step n, so no host time is on the critical path (TensorRT-LLM's executor, SGLang's overlap scheduler, vLLM
V1's engine-core loop with its persistent batch); `serial` runs that work between GPU steps (vLLM V0, the 2024
releases): each step adds `decode_seq_host_us` per sequence in it."""
DEFAULT_ENGINE = "overlapped"


class ComputeConstants(BaseModel):
    """data/compute.yaml, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: str
    as_of: object
    gemm_efficiency_max: float = Field(gt=0, le=1)
    gemm_efficiency_by_arch: dict[str, float] = {}
    """`arch:precision` (hopper:fp8) -> the share of that GPU generation's dense peak large GEMMs reach."""
    dense_clock_share_by_gpu: dict[str, float] = {}
    """`family:precision` (MI300X:fp8) -> the engine clock a power-limited GPU holds under dense GEMMs, as a
    share of the clock its datasheet peak assumes; a GPU not listed holds its datasheet clock (1.0)."""
    zero3_overlap: float = Field(default=1.0, ge=0, le=1)
    """Share of ZeRO-3 per-layer gathers that hides behind the layer's compute (the rest shows)."""
    tp_comm_overlap: float = Field(default=1.0, ge=0, le=1)
    """Share of tensor-parallel collectives hidden behind their GEMMs when TP overlap is on."""
    dp_bucket_params: float = Field(default=0.0, ge=0)
    """Parameters per data-parallel gradient bucket; the last bucket's reduction cannot overlap."""
    priors: dict[str, float] = {}
    """What a fitted constant is when no evidence covers it (the fitting procedure's fallback)."""
    gemm_half_gflop: float = Field(ge=0)
    hbm_efficiency: float = Field(gt=0, le=1)
    decode_hbm_efficiency: float = Field(gt=0, le=1)
    decode_hbm_measured_by_vendor: dict[str, float] = {}
    """GPU vendor -> the share of datasheet HBM bandwidth a decode step's GEMMs were measured to read their
    weights at."""
    infer_gemm_efficiency_by_arch: dict[str, float] = {}
    """`arch:precision` -> the share of dense peak serving GEMMs (prefill, large-batch decode) reach."""
    decode_kernels_per_layer: int = Field(default=10, ge=1)
    """Kernels one transformer layer launches in a serving engine's forward pass, all-reduces aside (two
    norms, rotary embedding, KV-cache write, attention, activation and the four GEMMs)."""
    decode_kernel_us: float = Field(default=0.0, ge=0)
    """Time each of those kernels costs beyond its bytes and FLOPs under CUDA-graph replay (the dispatch gap
    between graph nodes plus a small kernel's ramp and tail), microseconds."""
    prefill_chunk_tokens: int = Field(default=8192, ge=1)
    """Most prompt tokens a serving engine puts in one step (its chunked-prefill token budget): a prompt enters
    the running batch in chunks of at most this many tokens, one chunk per step."""
    decode_seq_host_us: float = Field(default=0.0, ge=0)
    """Host time per sequence in an engine step that the GPU waits for (building the step's inputs, sampling,
    detokenizing and streaming each sequence's token) when the engine runs it between GPU steps, microseconds."""
    flash_attention_efficiency: float = Field(gt=0, le=1)
    attention_efficiency_by_kernel: dict[str, dict[str, float]] = {}
    """Fused attention kernel (`flash2`, `triton`) -> GPU generation -> share of dense BF16 peak it reaches on the
    causal half; `flash` (the kernel tuned for each generation) takes `flash_attention_efficiency`."""
    layer_overhead_us: float = Field(ge=0)
    weight_bytes: float = Field(gt=0)
    grad_bytes: float = Field(gt=0)
    optimizer_bytes: float = Field(ge=0)
    optimizer_traffic_bytes: float = Field(ge=0)
    cuda_context_gib: float = Field(ge=0)
    nccl_buffers_gib: float = Field(ge=0)
    fragmentation_reserve: float = Field(ge=0, lt=1)
    reserved_over_allocated: float = Field(default=1.0, ge=1.0, le=2.0)
    """Peak bytes the caching allocator reserves over the peak bytes the tensors need, where the job had room to
    spare (what a `max_memory_reserved` figure reads against the memory model's)."""

    def gemm_max(self, arch: str, precision: str) -> float:
        """Share of dense peak large GEMMs reach on `arch` in `precision` (fp16 counts as bf16). Without
        evidence for that pair: the same generation's other format, then the previous generation's (a newer
        GPU is not assumed to reach more of its peak), then the calibration set's A100 share."""
        fmt = "bf16" if precision == "fp16" else precision
        for key in _fallback_keys(arch, fmt):
            if key in self.gemm_efficiency_by_arch:
                return self.gemm_efficiency_by_arch[key]
        return self.gemm_efficiency_max

    def dense_clock_share(self, family: str, precision: str) -> float:
        """Share of its datasheet clock `family` holds under dense GEMMs in `precision` (fp16 counts as bf16)."""
        fmt = "bf16" if precision == "fp16" else precision
        return self.dense_clock_share_by_gpu.get(f"{family}:{fmt}", 1.0)

    def decode_hbm(self, vendor: str) -> float:
        """Share of datasheet HBM bandwidth decode reads weights and KV at on `vendor`'s GPUs: the measured
        value, else `decode_hbm_efficiency` (the prior)."""
        return self.decode_hbm_measured_by_vendor.get(vendor, self.decode_hbm_efficiency)

    def forward_fixed_us(self, layers: int) -> float:
        """Fixed time of one serving forward pass over `layers` layers on the GPU, all-reduces aside: its
        small kernels' cost under CUDA-graph replay."""
        return layers * self.decode_kernels_per_layer * self.decode_kernel_us

    def attention_share(self, kernel: str, arch: str) -> float:
        """Share of dense BF16 peak (at the dense-GEMM clock) a fused attention `kernel` (`flash`, `flash2` or
        `triton`) reaches on the GPU generation `arch`. A kernel's share is the generation's own, else the newest
        earlier NVIDIA generation's with one (a GPU outside that line takes the first's); `flash` and a kernel
        without a table take `flash_attention_efficiency`."""
        table = self.attention_efficiency_by_kernel.get(kernel, {})
        lineage = GENERATIONS[:GENERATIONS.index(arch) + 1] if arch in GENERATIONS else GENERATIONS[:1]
        for gen in reversed(lineage):
            if gen in table:
                return table[gen]
        return self.flash_attention_efficiency

    def infer_gemm_max(self, arch: str, precision: str) -> float:
        """Share of dense peak serving GEMMs reach on `arch` in `precision`: the inference fit's value, with
        the same fallback as `gemm_max` inside the inference values, then the training share."""
        fmt = "bf16" if precision == "fp16" else precision
        for key in _fallback_keys(arch, fmt):
            if key in self.infer_gemm_efficiency_by_arch:
                return self.infer_gemm_efficiency_by_arch[key]
        return self.gemm_max(arch, precision)


GENERATIONS = ("ampere", "hopper", "blackwell")
"""NVIDIA datacenter GPU generations in order; the share fallback walks back along it."""
AMD_GENERATIONS = ("cdna3", "cdna4")
"""AMD Instinct generations in order: a CDNA 4 part without evidence takes CDNA 3's share (same ROCm stack,
hipBLASLt and CK kernels), not the calibration set's A100 share."""


def _fallback_keys(arch: str, fmt: str) -> list[str]:
    other = "fp8" if fmt == "bf16" else "bf16"
    keys = [f"{arch}:{fmt}", f"{arch}:{other}"]
    for lineage in (GENERATIONS, AMD_GENERATIONS):
        if arch in lineage:
            for prev in reversed(lineage[:lineage.index(arch)]):
                keys += [f"{prev}:{fmt}", f"{prev}:{other}"]
    return keys


def compute_constants() -> ComputeConstants:
    """The compute constants in force: the packaged ones, or those of an enclosing `constants_override`."""
    return _IN_FORCE.get()


def constants_override(constants: ComputeConstants) -> AbstractContextManager[None]:
    """Predict with `constants` instead of the packaged ones (the fitting procedure tries candidates)."""
    return _IN_FORCE.override(constants)


@functools.cache
def packaged_constants() -> ComputeConstants:
    """The packaged compute constants, loaded once (and kept validated between starts)."""
    return built_cache.cached("compute", [COMPUTE_FILE], (Path(__file__),), _validated_constants)


def _validated_constants() -> ComputeConstants:
    try:
        return ComputeConstants.model_validate(parse_yaml(COMPUTE_FILE.read_text(encoding="utf-8")))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(COMPUTE_FILE), err["msg"], field=".".join(map(str, err["loc"]))) from None


_IN_FORCE = InForce(packaged_constants)


REFERENCE_GEMM_TFLOPS = 312.0
"""Dense BF16 peak of the A100 (NVIDIA A100 datasheet), the GPU the calibration set's `gemm_half_gflop` is for."""


def gemm_half_gflop(c: ComputeConstants, peak_tflops: float, top: float) -> float:
    """GEMM size at which a GPU reaches half its large-GEMM share. What a small GEMM loses is a fixed time (the
    launch, the first and last wave of tiles, the K-loop's prologue and epilogue), so the size that hides it
    grows with the throughput the GPU reaches: the calibration set's A100 value, scaled by peak x share."""
    return c.gemm_half_gflop * (peak_tflops * top) / (REFERENCE_GEMM_TFLOPS * c.gemm_efficiency_max)


def gemm_efficiency(gflop: np.ndarray, c: ComputeConstants, top: float | None = None,
                    half_gflop: float | None = None) -> np.ndarray:
    """Share of dense peak a GEMM of `gflop` GFLOP reaches: small GEMMs cannot fill the GPU. `top` is the
    large-GEMM share of the GPU generation and number format (default: the calibration set's); `half_gflop`
    the size at which half of it is reached (default: the calibration set's A100 value)."""
    top = c.gemm_efficiency_max if top is None else top
    half = c.gemm_half_gflop if half_gflop is None else half_gflop
    return top * gflop / (gflop + half)


def gemm_time_s(flops: np.ndarray, peak_tflops: float, c: ComputeConstants, top: float | None = None,
                half_gflop: float | None = None) -> np.ndarray:
    """Time of one GEMM of `flops` FLOPs."""
    gflop = np.asarray(flops, dtype=float) / 1e9
    return flops / (peak_tflops * 1e12 * gemm_efficiency(gflop, c, top, half_gflop))


def memory_time_s(nbytes: np.ndarray | float, gpu: GpuSpec, c: ComputeConstants) -> np.ndarray:
    """Time of element-wise kernels moving `nbytes` through HBM."""
    return np.asarray(nbytes, dtype=float) / (gpu.hbm_gb_per_s * 1e9 * c.hbm_efficiency)


def usable_memory_gib(gpu: GpuSpec, c: ComputeConstants | None = None) -> float:
    """GPU memory a job can fill: the capacity less the allocator's fragmentation reserve, the CUDA context
    and workspaces, and NCCL's buffers."""
    c = c or compute_constants()
    return gpu.memory_gib * (1.0 - c.fragmentation_reserve) - c.cuda_context_gib - c.nccl_buffers_gib


def peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """Dense tensor peak for the GEMMs of a job in `precision` (bf16, fp16 or fp8)."""
    return gpu.dense_tflops(precision)


def sustained_tflops(gpu: GpuSpec, precision: str, c: ComputeConstants) -> float:
    """The dense peak at the clock the GPU holds under dense GEMMs: what the GEMM and attention shares are
    shares of. MFU stays against the datasheet peak (`peak_tflops`)."""
    return peak_tflops(gpu, precision) * c.dense_clock_share(gpu.family, precision)
