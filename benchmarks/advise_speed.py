"""How fast `linkscope advise train` answers, against its 5 s budget and against a plain per-System search.

Cases:
  1. megatron-1t over the whole catalog at 8..4096 GPUs (the budget case), in-process and end to end through
     the command line (a fresh Python process, imports and data loading included);
  2. llama2-70b on 64 GPUs, the call the README's demo ends with;
  3. the reference: the same catalog and GPU counts as case 1, one `model.search.search` per offering and node
     count (no batching, no sharing, no memory screen), to show what the bulk search saves.

Run:  python benchmarks/advise_speed.py [--no-reference]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from linkscope.advise.bookable import GpuRequest, bookable_node_counts
from linkscope.advise.inputs import default_global_batch
from linkscope.advise.train import TrainAdvice, TrainRequest, advise_train
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.step.search import LayoutRequest, search
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.step.transformer import load_model

BUDGET_S = 5.0
BIG = ("megatron-1t", 3e11, GpuRequest(None, 8, 4096))
DEMO = ("llama2-70b", 2e9, GpuRequest(gpus=64))


def _request(model: str, tokens: float, gpus: GpuRequest) -> TrainRequest:
    config = load_model(model)
    return TrainRequest(model=config, tokens=tokens, global_batch=default_global_batch(config.seq_len),
                        seq_len=config.seq_len, gpus=gpus, global_batch_is_default=True)


def in_process(model: str, tokens: float, gpus: GpuRequest) -> tuple[float, TrainAdvice]:
    """Wall time of loading the catalog and ranking it, in this process."""
    start = time.perf_counter()
    db = load_db([])
    advice = advise_train(_request(model, tokens, gpus), list(db.offerings.values()))
    return time.perf_counter() - start, advice


def end_to_end(args: list[str]) -> float:
    """Wall time of `python -m linkscope ARGS` in a fresh process."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "linkscope", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def reference(model: str, tokens: float, gpus: GpuRequest) -> tuple[float, int]:
    """One plain `search` per offering and bookable node count: (seconds, layouts priced)."""
    db = load_db([])
    request = _request(model, tokens, gpus)
    job = request.job()
    start, priced = time.perf_counter(), 0
    for offering in db.offerings.values():
        counts, _ = bookable_node_counts(offering, comm_tiers(offering.system), gpus)
        for nodes in counts:
            try:
                priced += search(job, offering.system.with_nodes(nodes), LayoutRequest()).evaluated
            except UserError:
                continue
    return time.perf_counter() - start, priced


def _report(label: str, seconds: float, advice: TrainAdvice) -> None:
    print(f"{label}: {seconds:.2f} s in process, {len(advice.rows)} offerings, {len(advice.feasible)} feasible; "
          f"{advice.layouts_enumerated:,} layouts considered ({advice.layouts_enumerated / seconds:,.0f}/s), "
          f"{advice.layouts_priced:,} fit memory and were priced ({advice.layouts_priced / seconds:,.0f}/s)")


def main() -> None:
    """Run the cases and print times, rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-reference", action="store_true", help="skip the slow per-System reference")
    args = parser.parse_args()
    big_s, big = in_process(*BIG)
    _report("megatron-1t, whole catalog, 8..4096 GPUs", big_s, big)
    cli_s = end_to_end(["advise", "train", "--model", "megatron-1t", "--tokens", "300B", "--gpus-range", "8..4096",
                        "--json"])
    verdict = "within" if cli_s < BUDGET_S else "OVER"
    print(f"  end to end through the command line: {cli_s:.2f} s ({cli_s / BUDGET_S:.0%} of the {BUDGET_S:g} s "
          f"budget: {verdict})")
    demo_s, demo = in_process(*DEMO)
    _report("llama2-70b, 64 GPUs (demo)", demo_s, demo)
    demo_cli_s = end_to_end(["advise", "train", "--model", "llama2-70b", "--tokens", "2B", "--gpus", "64",
                             "--top", "5"])
    print(f"  end to end through the command line: {demo_cli_s:.2f} s")
    if args.no_reference:
        return
    ref_s, ref_priced = reference(*BIG)
    print(f"reference, one search() per offering and node count: {ref_s:.2f} s, {ref_priced:,} layouts priced "
          f"({ref_priced / ref_s:,.0f}/s); the bulk search answers {ref_s / big_s:.1f}x faster")


if __name__ == "__main__":
    main()
