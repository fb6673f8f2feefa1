"""Accuracy of MoE training steps against the Megatron-Bridge performance summary's MoE rows (out of sample).

No constant of the step model is fitted on these rows: they are printed as the model predicts them, to show how
far the MoE step model is from measured throughput. Rows: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md
(commit 00b7660b), 25.11 NeMo container, DGX-H100 and DGX-B200 tables (force-balanced, dropless routing); the
DGX-H100 Qwen3_235B row is left out because its columns are shifted in the source. Distributed optimizer (ZeRO-1)
and the alltoall dispatcher are assumed (the table does not state them).

    python benchmarks/accuracy_moe_training.py
"""

from __future__ import annotations

import statistics

from linkscope.hardware.loader import load_db
from linkscope.model.step.job import Job
from linkscope.model.step.layout import single_layout
from linkscope.model.step.train import estimate_steps
from linkscope.model.step.transformer import model_presets

# system, model, GPUs, precision, GBS, MBS, seq len, TP, PP, VP, EP, measured tokens/s per GPU
ROWS = [
    ("dgx-h100", "gpt-oss-120b", 64, "bf16", 512, 4, 4096, 1, 4, 1, 8, 5630),
    ("dgx-h100", "qwen3-30b-a3b", 16, "fp8", 512, 2, 4096, 1, 2, 24, 8, 5275),
    ("hgx-b200", "deepseek-v3", 256, "fp8", 2048, 1, 4096, 1, 16, 1, 8, 2139),
    ("hgx-b200", "gpt-oss-120b", 64, "bf16", 512, 4, 4096, 1, 1, 1, 8, 8213),
    ("hgx-b200", "qwen3-30b-a3b", 8, "fp8", 512, 1, 4096, 1, 1, 1, 8, 9299),
    ("hgx-b200", "qwen3-235b-a22b", 64, "fp8", 1024, 1, 4096, 1, 8, 2, 8, 3269),
]


def main() -> None:
    """Print each row's predicted and measured tokens/s per GPU and the error."""
    db = load_db(include_user=False)
    errors = []
    for system_id, model, gpus, precision, gbs, mbs, seq, tp, pp, vp, ep, measured in ROWS:
        system = db.systems[system_id].with_gpus(gpus)
        job = Job(model=model_presets()[model], global_batch=gbs, seq_len=seq, precision=precision)
        layout = single_layout(tp=tp, pp=pp, dp=gpus // (tp * pp), v=vp, mb=mbs, zero=1, ep=ep)
        est = estimate_steps(job, system, layout)
        predicted = float(est.tokens_per_s[0]) / gpus
        error = predicted / measured - 1.0
        errors.append(abs(error))
        ep_share = float(est.ep_comm_exposed_s[0] / est.step_time_s[0])
        print(f"{system_id:9} {model:16} {gpus:4} GPUs {precision:5} measured {measured:6} tokens/s/GPU, "
              f"predicted {predicted:7.0f} ({error:+.0%}); dispatch+combine {ep_share:.0%} of the step")
    print(f"median |error| {statistics.median(errors):.0%}, max {max(errors):.0%} over {len(errors)} rows")


if __name__ == "__main__":
    main()
