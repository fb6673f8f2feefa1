"""Physical ceilings no predicted figure may pass: the dense peak of the format, HBM bandwidth, link bandwidth.

The step models compose fitted shares of these ceilings, so their figures stay below them by construction; these
functions state the bounds on their own, from datasheet facts alone, so that a test can sweep every preset and a
caller can hold a figure at its bound. The training step is held at its peak bound where it is computed
(model/step/train.py, `StepEstimate.peak_bound`).
"""

from __future__ import annotations

from linkscope.hardware.system import System
from linkscope.model.step.infer import BYTES_PER_WEIGHT, InferJob, kv_cache_bytes_per_token
from linkscope.model.ranges.mfu import mfu_peak

IN_NETWORK_OPS = ("all_reduce",)
"""Collectives an in-network reduction (NVLink SHARP) serves: each GPU sends its data once and receives the
result once, so its algbw, not its busbw, is bounded by the link."""


def train_step_floor_s(flops_per_step: float, gpus: int, system: System, precision: str) -> float:
    """The least time a step of `flops_per_step` model FLOPs takes on `gpus` GPUs: all at the dense peak of the
    format (100% MFU); 0 where no peak is defined (a CPU host)."""
    peak = mfu_peak(system.node.gpu, precision)
    return flops_per_step / gpus / (peak.tflops * 1e12) if peak.tflops > 0 else 0.0


def decode_tokens_per_s_per_gpu_ceiling(job: InferJob, system: System, batch: float) -> float:
    """Output tokens/s per GPU no decode can pass: each step reads at least every stage's dense weights (all but
    the embedding lookup and the routed experts) and the batch's KV cache of its prompts from HBM, at the full
    datasheet bandwidth, and yields `batch` tokens on tp x pp GPUs."""
    m = job.model
    dense_params = m.total_params() - m.embedding_params() - m.moe_layers * m.expert_layer_params()
    weights_bytes = dense_params * BYTES_PER_WEIGHT[job.precision] / job.tp
    kv_bytes = batch * job.input_tokens * kv_cache_bytes_per_token(m, job.kv_precision) / (job.tp * job.pp)
    # The stages run one after another for one token, each reading its share.
    step_s = (weights_bytes + kv_bytes * job.pp) / (system.node.gpu.hbm_gb_per_s * 1e9)
    return batch / step_s / (job.tp * job.pp)


def busbw_ceiling_gb_per_s(system: System, op: str, gpus: int) -> float:
    """The busbw (nccl-tests' convention) no collective on `gpus` GPUs of `system` can pass: the GPU's fastest
    link per direction, times 2(n-1)/n for an all-reduce that the switch reduces (NVLS)."""
    node = system.node
    link = max(node.scale_up.bw_gb_per_s, node.scale_out_gb_per_s_per_gpu() or 0.0)
    if op in IN_NETWORK_OPS and node.scale_up.in_network_reduction != "none" and gpus > 1:
        return link * 2 * (gpus - 1) / gpus
    return link
