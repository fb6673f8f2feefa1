"""The same MoE dispatch on every transport, and each transport's error on its evidence rows.

    python benchmarks/accuracy_moe_transports.py

First table: DeepSeek-V3's decode dispatch (128 tokens per rank, 7168 hidden, top-8 of 256 experts, FP8) on H200
nodes of 8 GPUs with 3.2 Tb/s of scale-out each: inside one node (nvlink), across two over InfiniBand with
GPU-initiated RDMA (ibgda) and through a host proxy (proxy), and across two AWS p5en over EFA (efa), each with the
kernel that runs there. Second table: per transport, the model's error on the evidence rows whose dispatch or
combine ran on it (model/data/evidence.yaml and evidence/moe_transports.yaml), as `linkscope validate` computes
them (median and largest |predicted / measured - 1|).
"""

from __future__ import annotations

import statistics

from linkscope.hardware.loader import load_db
from linkscope.model.calibration.systems import resolve
from linkscope.model.comm.moe import MoeRequest, predict_moe
from linkscope.model.fidelity.evidence import load_evidence
from linkscope.model.fidelity.evidence_predict import measured, moe_transport, predicted

RUNS = (("hgx-h200", 8, "deepep-ll", "auto"), ("hgx-h200", 16, "deepep-ll", "auto"),
        ("hgx-h200", 16, "deepep-ll", "proxy"), ("aws/p5en.48xlarge", 16, "uccl-ep-ll", "auto"))


def main() -> None:
    """Print both tables."""
    db = load_db([])
    print(f"{'transport':<10}{'system':<19}{'kernel':<11}{'ep':>3}{'nodes':>6}{'dispatch us':>12}{'combine us':>11}"
          f"{'per-peer us':>12}")
    for system, ep, kernel, transport in RUNS:
        tiers = resolve(system, db, ep, None).tiers
        p = predict_moe(tiers, MoeRequest(ep=ep, kernel=kernel, transport=transport, tokens_per_rank=128,
                                          hidden=7168, topk=8, experts=256))
        print(f"{p.transport:<10}{system:<19}{p.kernel:<11}{p.ep:>3}{p.nodes:>6}{p.dispatch_us:>12.1f}"
              f"{p.combine_us:>11.1f}{p.peer_us:>12.1f}")
    print()
    errors: dict[str, list[float]] = {}
    for entry in load_evidence().moe:
        errors.setdefault(moe_transport(entry, db), []).append(abs(predicted(entry, db) / measured(entry) - 1))
    print(f"{'transport':<10}{'rows':>5}{'median error':>14}{'largest':>9}")
    for transport, errs in sorted(errors.items()):
        print(f"{transport:<10}{len(errs):>5}{statistics.median(errs):>13.1%}{max(errs):>9.0%}")


if __name__ == "__main__":
    main()
