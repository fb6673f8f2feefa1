"""No figure passes a physical ceiling: every System preset x every model preset x every format its GPU runs,
through the training step, the serving model and the collectives, against the dense peak, HBM and link bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.system import System
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.step.ceilings import (busbw_ceiling_gb_per_s, decode_tokens_per_s_per_gpu_ceiling,
                                             train_step_floor_s)
from linkscope.model.step.compute import PRECISIONS
from linkscope.model.step.infer import InferJob, estimate_inference, serving_tflops_per_gpu, tp_options
from linkscope.model.step.job import Job
from linkscope.model.ranges.mfu import mfu_peak
from linkscope.model.step.peft import training_flops_per_token
from linkscope.model.step.predict import predict_train
from linkscope.model.step.search import LayoutRequest
from linkscope.model.step.transformer import ModelConfig, model_presets

SLACK = 1 + 1e-9
BATCHES = np.asarray([1.0, 8.0, 64.0, 512.0])
"""Whether or not a batch fits, its figures must stay physical."""


def _systems() -> dict[str, System]:
    return dict(load_db(include_user=False).systems)


def _models() -> dict[str, ModelConfig]:
    return {m.id: m for m in model_presets().values()}


def _formats(system: System) -> list[str]:
    return [p for p in PRECISIONS if p != "fp8" or system.node.gpu.fp8_dense_tflops is not None]


def _clean(exc: UserError) -> None:
    """A refusal is one line naming what is wrong, never a stray exception."""
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text


def _two_nodes(system: System) -> System:
    return system if system.domain_spans_nodes else system.with_nodes(2)


@pytest.mark.parametrize("seq_len", [4096, 32768])
def test_training_never_passes_the_dense_peak(seq_len: int) -> None:
    """Every preset x model x format on a fixed data-parallel layout: MFU <= 100% of the named peak, the step
    time positive, finite and no shorter than the model FLOPs at that peak."""
    request = LayoutRequest(tp=1, pp=1, cp=1, interleave=1, micro_batch=1, recompute="none", zero=1, ep=1)
    checked = refused = 0
    for system in map(_two_nodes, _systems().values()):
        for precision in _formats(system):
            peak = mfu_peak(system.node.gpu, precision)
            for model in _models().values():
                job = Job(model=model, global_batch=system.gpus * 2, seq_len=seq_len, precision=precision)
                try:
                    p = predict_train(job, system, request)
                except UserError as exc:
                    _clean(exc)
                    refused += 1
                    continue
                checked += 1
                assert math.isfinite(p.step_time_s) and p.step_time_s > 0, (system.id, model.id, precision)
                assert p.mfu_precision == peak.precision and p.mfu_peak_tflops == peak.tflops
                assert 0 < p.mfu <= SLACK, (system.id, model.id, precision, p.mfu)
                flops = training_flops_per_token(model, None, seq_len) * job.global_batch * seq_len
                assert p.step_time_s * SLACK >= train_step_floor_s(flops, p.gpus, system, precision)
    assert checked > 500 and refused < checked


def test_serving_never_passes_hbm_or_the_dense_peak() -> None:
    """Every preset x model x format at the widest TP inside a node, batches 1 to 512: decode tokens/s
    per GPU within the HBM bound of weights + KV, serving MFU <= 100%, times positive and finite."""
    checked = 0
    for system in _systems().values():
        for precision in _formats(system):
            peak = mfu_peak(system.node.gpu, precision)
            for model in _models().values():
                tps = tp_options(model, system.max_nccl_node_gpus)
                if not tps:
                    continue
                job = InferJob(model=model, tp=tps[-1], pp=1, input_tokens=2048, output_tokens=256,
                               precision=precision, kv_precision=precision)
                try:
                    est = estimate_inference(job, system, BATCHES)
                except UserError as exc:
                    _clean(exc)
                    continue
                checked += 1
                assert np.all(np.isfinite(est.tpot_s)) and np.all(est.tpot_s > 0), (system.id, model.id)
                ceiling = np.array([decode_tokens_per_s_per_gpu_ceiling(job, system, b) for b in est.batch])
                assert np.all(est.tokens_per_s_per_gpu <= ceiling * SLACK), (system.id, model.id, precision)
                mfu = peak.mfu(serving_tflops_per_gpu(model, float(est.tokens_per_s_per_gpu.max())))
                assert 0 < mfu <= SLACK, (system.id, model.id, precision, mfu)
    assert checked > 500


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"])
def test_collectives_never_pass_the_link(op: str) -> None:
    """Every preset, in one node and across two, 1 KiB .. 16 GiB: busbw within the fastest link's bandwidth
    (x 2(n-1)/n for an all-reduce the switch reduces), times positive and finite."""
    sizes = [1 << 10, 1 << 20, 1 << 26, 1 << 30, 1 << 34]
    for base in _systems().values():
        for system in {base.with_nodes(1).id: base.with_nodes(1), "2": _two_nodes(base)}.values():
            for gpus in sorted({2, system.node.gpus, system.gpus}):
                try:
                    rows = predict_sizes(system, op, sizes, gpus)
                except UserError as exc:
                    _clean(exc)
                    continue
                ceiling = busbw_ceiling_gb_per_s(system, op, gpus)
                for row in rows:
                    assert math.isfinite(row.time_us) and row.time_us > 0
                    assert row.busbw <= ceiling * SLACK, (system.id, op, gpus, row.bytes, row.busbw, ceiling)
