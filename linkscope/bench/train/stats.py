"""Step-time statistics and rates of one measured training configuration.

FLOPs per token come from `ModelConfig.model_flops_per_token`, the convention `predict train` uses (forward and
backward, no recomputation), so measured and predicted TFLOPS and MFU compare like for like.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from linkscope.model.step.peft import Peft, training_flops_per_token
from linkscope.model.step.transformer import ModelConfig


@dataclass
class StepStats:
    """Timed steps of every repeat, summarised (seconds)."""

    step_time_s: float
    step_time_s_min: float
    step_time_s_max: float
    step_time_s_stdev: float
    repeat_means_s: list[float]
    """Mean step time of each whole run (`--repeat`)."""
    repeat_stdev_s: float
    steps: int


def step_stats(steps: list[dict[str, Any]]) -> StepStats | None:
    """Summary of the timed (non-warm-up) steps; None when there are none."""
    timed = [s for s in steps if s["step"] >= 0]
    if not timed:
        return None
    times = [s["step_time_s"] for s in timed]
    by_repeat: dict[int, list[float]] = {}
    for s in timed:
        by_repeat.setdefault(s["repeat"], []).append(s["step_time_s"])
    means = [statistics.fmean(v) for _, v in sorted(by_repeat.items())]
    return StepStats(step_time_s=statistics.fmean(times), step_time_s_min=min(times), step_time_s_max=max(times),
                     step_time_s_stdev=statistics.stdev(times) if len(times) > 1 else 0.0, repeat_means_s=means,
                     repeat_stdev_s=statistics.stdev(means) if len(means) > 1 else 0.0, steps=len(times))


def rates(model: ModelConfig, tokens_per_step: int, ranks: int, step_time_s: float,
          peak_tflops: float | None, peft: Peft | None = None) -> dict[str, float | None]:
    """tokens/s, TFLOPS per rank and MFU (None without a peak to divide by, as on CPU ranks); a LoRA run counts
    the fine-tune's FLOPs (no weight gradients for the frozen base)."""
    flops = training_flops_per_token(model, peft, model.seq_len) * tokens_per_step
    tflops = flops / step_time_s / ranks / 1e12
    return {"tokens_per_s": tokens_per_step / step_time_s, "tflops_per_rank": tflops,
            "mfu": tflops / peak_tflops if peak_tflops else None}


def stats_dict(stats: StepStats) -> dict[str, Any]:
    """JSON-ready."""
    return asdict(stats)
