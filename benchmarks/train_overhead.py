"""`bench train`'s step time against a bare PyTorch loop of the same model and layout, in the same run.

Two gloo ranks each build linkscope's Trainer (the model, DDP wrapping, optimizer and data `bench train`
uses) and a bare loop (the same Decoder under DDP, AdamW, the same tokens; forward, backward, step, zero_grad,
timed with perf_counter). Blocks of steps alternate between the two so that load on a shared host hits both
alike, and which side goes first alternates too; every step of either side is followed by the same cross-rank
sync outside the clock. Prints both medians and the ratio (goal: within 2%).

    python benchmarks/train_overhead.py [--layers 2] [--hidden 256] [--blocks 6] [--steps 10] [--lora R]

With --lora R both sides fine-tune: adapters of rank R on the attention projections, the base frozen, AdamW over
the adapters only (the bare loop adds them with the same `add_lora` and hands DDP the same module).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time
from pathlib import Path

BLOCKS, STEPS = 6, 10


def _bare_step(model, opt, batch):  # type: ignore[no-untyped-def]
    from linkscope.bench.train.model import loss_of

    loss = loss_of(model(batch[:, :-1]), batch[:, 1:])
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _rank(rank: int, init: str, args: argparse.Namespace, q: mp.Queue) -> None:  # type: ignore[type-arg]
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from linkscope.bench.comm import init_rank
    from linkscope.bench.config import RunOptions
    from linkscope.bench.layout import RankEnv
    from linkscope.bench.train.config import TrainConfig
    from linkscope.bench.train.loop import Trainer, synthetic_batches
    from linkscope.bench.train.lora import add_lora
    from linkscope.bench.train.model import Decoder
    from linkscope.model.step.scaled import scaled_model
    from linkscope.model.step.transformer import load_model

    ctx = init_rank(RankEnv(rank, 2, rank, 2, 0), "gloo", init, 120.0, lambda v: None)
    m = scaled_model(load_model("llama2-7b"), layers=args.layers, hidden=args.hidden, heads=args.hidden // 32,
                     vocab=1024, seq_len=128)
    cfg = TrainConfig(model=m, lora_rank=args.lora, run=RunOptions(backend="gloo")).validated()
    ours = Trainer(cfg, ctx)
    torch.manual_seed(0)
    module = Decoder(m)
    if cfg.peft is not None:
        add_lora(module, cfg.peft)
    bare = DistributedDataParallel(module, bucket_cap_mb=cfg.bucket_mb)
    opt = torch.optim.AdamW([p for p in bare.parameters() if p.requires_grad], lr=cfg.lr, foreach=True)
    batches = synthetic_batches(cfg, rank, ctx.device)
    times: dict[str, list[float]] = {"bench": [], "bare": []}

    def bench_block(record: bool) -> None:
        for _ in range(args.steps):
            seconds = ctx.timer.loop_seconds(ours.step, 1, None)
            ctx.allreduce_float(seconds, "max")  # what bench train does per step, outside the clock
            if record:
                times["bench"].append(seconds)

    def bare_block(record: bool) -> None:
        for i in range(args.steps):
            start = time.perf_counter()
            _bare_step(bare, opt, batches[i % len(batches)])
            seconds = time.perf_counter() - start
            # The same sync outside the clock as bench train's: both sides start each step with the ranks
            # lined up, so neither side's timing carries the other rank's lag from the step before.
            ctx.allreduce_float(seconds, "max")
            if record:
                times["bare"].append(seconds)

    for block in range(args.blocks + 1):  # block 0 warms both up
        # Which side goes first alternates, so that neither always runs on the other's leftovers.
        for run in ((bench_block, bare_block) if block % 2 == 0 else (bare_block, bench_block)):
            run(block > 0)
    q.put((rank, times))
    ctx.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--blocks", type=int, default=BLOCKS)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--lora", type=int, default=0, help="LoRA rank on both sides (0: full training)")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + str(Path(tmp) / "rdzv")
        procs = [ctx.Process(target=_rank, args=(r, init, args, q)) for r in range(2)]
        for p in procs:
            p.start()
        results = dict(q.get(timeout=600) for _ in procs)
        for p in procs:
            p.join(30)
    bench = statistics.median(results[0]["bench"])
    bare = statistics.median(results[0]["bare"])
    tune = f", LoRA rank {args.lora} (base frozen)" if args.lora else ""
    print(f"llama2-7b scaled to {args.layers} layers x {args.hidden}, 2 gloo ranks, DDP{tune}, "
          f"{args.blocks} x {args.steps} steps each, interleaved")
    print(f"bench train step (median) {bench * 1e3:.2f} ms; bare PyTorch loop {bare * 1e3:.2f} ms; "
          f"ratio {bench / bare:.3f}x (goal: within 2%, 0.98x..1.02x)")


if __name__ == "__main__":
    main()
