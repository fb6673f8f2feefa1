"""Run a test function on N local gloo ranks (spawned processes) and collect what each returns."""

from __future__ import annotations

import multiprocessing as mp
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _entry(fn: Callable[..., Any], rank: int, world: int, init_method: str, q: Any, kwargs: dict[str, Any]) -> None:
    from linkscope.bench.comm import init_rank
    from linkscope.bench.layout import RankEnv

    ctx = init_rank(RankEnv(rank, world, rank, world, 0), "gloo", init_method, 60.0, lambda value: None)
    try:
        q.put((rank, fn(ctx, **kwargs)))
    except Exception as exc:  # noqa: BLE001 - hand the failure to the test process
        q.put((rank, f"{type(exc).__name__}: {exc}"))
    ctx.close()


def run_on_ranks(fn: Callable[..., Any], world: int = 2, timeout_s: float = 120.0, **kwargs: Any) -> list[Any]:
    """`fn(ctx, **kwargs)` on every rank (a module-level function, so it can be sent to a spawned process)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + str(Path(tmp) / "rdzv")
        procs = [ctx.Process(target=_entry, args=(fn, r, world, init, q, kwargs)) for r in range(world)]
        for p in procs:
            p.start()
        results = dict(q.get(timeout=timeout_s) for _ in range(world))
        for p in procs:
            p.join(30)
    return [results[r] for r in range(world)]

