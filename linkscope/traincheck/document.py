"""One measured point as the `--json` document: measurement, prediction side by side, error in %."""

from __future__ import annotations

from typing import Any

from linkscope.bench.train.recorder import TrainPoint
from linkscope.bench.train.runner import TrainRunResult
from linkscope.bench.train.stats import rates, stats_dict, step_stats
from linkscope.bench.train.trace_comm import TraceReport
from linkscope.hardware.loader import load_db
from linkscope.model.ranges.mfu import MfuPeak, mfu_peak
from linkscope.model.step.peft import Peft
from linkscope.model.step.transformer import ModelConfig
from linkscope.traincheck.predict import Prediction


def _peak(result: TrainRunResult, precision: str) -> MfuPeak | None:
    """The MFU peak (model/ranges/mfu.py) of the ranks' GPU in the run's format (bf16 or fp16; fp32 runs only on
    CPU ranks); None on CPU ranks, which have no datasheet peak."""
    system = result.system or {}
    if result.backend != "nccl" or system.get("gpu") in (None, "CPU"):
        return None
    gpu = load_db().gpu(system["gpu"])
    return mfu_peak(gpu, precision if precision in ("bf16", "fp16") else "bf16") if gpu is not None else None


def error_pct(predicted_s: float | None, measured_s: float | None) -> float | None:
    """(predicted − measured) / measured, in %."""
    if predicted_s is None or not measured_s:
        return None
    return 100.0 * (predicted_s - measured_s) / measured_s


def _parallelism(settings: dict[str, Any]) -> dict[str, Any]:
    ranks, tp = settings["ranks"], settings["tp"]
    return {"layout": settings["layout"], "dp": max(ranks // tp, 1), "tp": tp, "zero": settings["zero"],
            "bucket_mb": settings["bucket_mb"], "overlap": settings["overlap"],
            "grad_compression": settings["grad_compression"], "powersgd_rank": settings.get("powersgd_rank", 0),
            "recompute": settings["recompute"],
            "precision": settings["precision"], "micro_batch": settings["micro_batch"],
            "lora_rank": settings.get("lora_rank", 0), "ep": settings.get("ep", 1)}


def _losses(point: TrainPoint) -> dict[str, float | None]:
    values = [s["loss"] for s in point.steps]
    return {"first": values[0] if values else None, "last": values[-1] if values else None}


def point_document(result: TrainRunResult, point: TrainPoint, prediction: Prediction | None,
                   trace: TraceReport | None) -> dict[str, Any]:
    """The JSON document of one point (keys as `bench train --json` promises)."""
    stats = step_stats(point.steps)
    model = ModelConfig(**point.settings["model"])
    step_s = stats.step_time_s if stats else None
    tokens = point.meta.get("tokens_per_step", 0)
    rank = int(point.settings.get("lora_rank", 0))
    peft = Peft(rank=rank, targets=str(point.settings.get("lora_targets", "attn"))) if rank else None
    peak = _peak(result, str(point.settings.get("precision", "bf16")))
    measured = rates(model, tokens, point.ranks, step_s, peak.tflops if peak else None, peft) if step_s else {}
    peaks = [r["peak_memory_gib"] for r in point.per_rank]
    return {
        "run_id": result.run_id, "status": point.status, "label": point.label, "model": model.id,
        "params": point.meta.get("params"), "ranks": point.ranks, "backend": result.backend,
        "parallelism": _parallelism(point.settings),
        "step_time_s": step_s, "step_time_s_stdev": stats.step_time_s_stdev if stats else None,
        "steps": stats_dict(stats) if stats else None, "tokens_per_step": tokens,
        "tokens_per_s": measured.get("tokens_per_s"), "tflops_per_rank": measured.get("tflops_per_rank"),
        "mfu": measured.get("mfu"), "mfu_peak_tflops": peak.tflops if peak else None,
        "mfu_precision": peak.precision if peak else None,
        "peak_memory_gib": max(peaks) if peaks else None, "peak_memory_gib_per_rank": peaks,
        "peak_memory_kind": "allocated" if result.backend == "nccl" else "RSS above start",
        "comm_s": trace.comm_s if trace else {}, "exposed_comm_s": trace.exposed_comm_s if trace else {},
        "trace": _trace_part(point, trace),
        "loss": _losses(point),
        "predicted": _predicted(prediction),
        "error_pct": error_pct(prediction.step_time_s if prediction else None, step_s),
    }


def _predicted(prediction: Prediction | None) -> dict[str, Any] | None:
    if prediction is None:
        return None
    return {"step_time_s": prediction.step_time_s, "breakdown": prediction.breakdown,
            "memory_gib_per_gpu": prediction.memory_gib_per_gpu, "source": prediction.source,
            "parallelism": prediction.parallelism, "notes": prediction.notes}


def _trace_part(point: TrainPoint, trace: TraceReport | None) -> dict[str, Any] | None:
    if trace is None:
        return None
    return {"paths": point.trace_paths, "profiled_step_s": point.trace_step_wall_s, "source": trace.source,
            "slowest_rank": trace.slowest_rank, "held_back_s": trace.held_back_s,
            "ranks": [{"rank": r.rank, "comm_s": r.comm_s, "exposed_comm_s": r.exposed_comm_s,
                       "compute_s": r.compute_s, "overlap_pct": r.overlap_pct} for r in trace.ranks]}
