"""Accuracy of MoE training steps, leave one source out (LOSO), against the MoE training evidence.

The entries are linkscope/model/data/evidence/moe_training.yaml: the Megatron-Bridge 25.11 performance summary's
MoE rows, the Megatron-Core MoE README's Mixtral 8x7B run, the DeepSeek-V3 report and NeMo AutoModel's MoE rows.
The GEMM shares never see these runs (they are fitted on dense runs); the two constants fitted on them, the MoE
layers' fixed times per layer and per local expert (moe.yaml `moe_layer_overhead_us`, `moe_expert_overhead_us`),
are fitted again without each source in turn, and that source's entries are predicted with them. Errors are of
tokens/s per GPU (the published figure). `linkscope validate` reports the same entries as the `moe-training`
regime, with the fixed times as packaged.

    python benchmarks/accuracy_moe_training.py
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from linkscope.hardware.loader import load_db
from linkscope.model.comm.moe import moe_constants
from linkscope.model.fidelity.evidence import Entry, load_evidence
from linkscope.model.fidelity.evidence_predict import measured
from linkscope.model.fidelity.moe_fit import PricedMoeTraining, moe_training_entries, predicted_with_overhead


def _not_from(source: str) -> Callable[[Entry], bool]:
    """Keeps the entries of every source but `source`."""
    return lambda e: e.source != source


def main() -> None:
    """Print the fitted fixed times with each source left out, each entry's LOSO error and the medians."""
    db = load_db(include_user=False)
    entries = moe_training_entries(load_evidence())
    priced = PricedMoeTraining(entries, db)
    c = moe_constants()
    packaged = (c.moe_layer_overhead_us, c.moe_expert_overhead_us)
    print(f"(moe_layer_overhead_us, moe_expert_overhead_us): packaged {packaged}, fitted on all sources "
          f"{priced.fit()}")
    loso_errors, in_sample_errors = [], []
    for source in dict.fromkeys(e.source for e in entries):
        left_out = priced.fit(keep=_not_from(source))
        print(f"{source}: fitted without it {left_out} us")
        for e in (e for e in entries if e.source == source):
            # Tokens/s is inverse to step time, so the error of the published figure is measured / predicted - 1.
            loso = measured(e) / predicted_with_overhead(e, db, left_out) - 1.0
            in_sample = measured(e) / predicted_with_overhead(e, db, packaged) - 1.0
            loso_errors.append(abs(loso))
            in_sample_errors.append(abs(in_sample))
            print(f"  {e.system:22} {e.model:16} {e.gpus:5} GPUs {e.precision:4} mb {e.micro_batch} ep {e.ep:3}: "
                  f"{e.value:7.0f} tokens/s/GPU, LOSO {loso:+.0%}, in-sample {in_sample:+.0%}")
    print(f"tokens/s per GPU over {len(entries)} entries: LOSO median |error| {statistics.median(loso_errors):.0%}, "
          f"max {max(loso_errors):.0%}; in-sample median {statistics.median(in_sample_errors):.0%}")


if __name__ == "__main__":
    main()
