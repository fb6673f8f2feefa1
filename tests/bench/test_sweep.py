"""The per-rank loop on real gloo ranks: every op, type and reduction gives exactly the expected result."""

from __future__ import annotations

from linkscope.bench.comm import RankContext
from linkscope.bench.config import BenchConfig, RunOptions
from linkscope.bench.dtypes import DTYPES
from linkscope.bench.ops import OPS
from linkscope.bench.sweep import measure_size, step_label
from tests.bench.ranks import run_on_ranks

REDUCING = [op for op in OPS if OPS[op].reducing]
OTHERS = [op for op in OPS if not OPS[op].reducing]


def _combos() -> list[tuple[str, str, str]]:
    combos = []
    for dtype, dt in DTYPES.items():
        for redop in ("sum", "prod", "min", "max") + (("avg",) if dt.is_float else ()):
            combos += [(op, dtype, redop) for op in REDUCING]
        combos += [(op, dtype, "sum") for op in OTHERS]
    return combos


def _measure_all(ctx: RankContext, combos: list[tuple[str, str, str]], size_bytes: int) -> list[tuple]:
    out = []
    for op, dtype, redop in combos:
        cfg = BenchConfig(ops=(op,), dtype=dtype, redop=redop, iters=1, warmup=0, check=2, root=1)
        rows, wrong = measure_size(ctx, OPS[op], size_bytes, cfg, DTYPES[dtype])
        out.append((op, dtype, redop, [r.nwrong for r in rows], [r.count for r in rows], wrong))
    return out


def test_every_op_type_and_reduction_checks_clean_on_gloo() -> None:
    # 200 bytes: odd per-rank shares exercise the 16-byte rounding of gather-like ops.
    results = run_on_ranks(_measure_all, world=2, combos=_combos(), size_bytes=200)
    assert not isinstance(results[0], str), results[0]
    assert results[0] == results[1], "rows must be identical on every rank"
    for op, dtype, redop, nwrong, counts, wrong in results[0]:
        expected = [0, None] if op in ("all_to_all", "sendrecv") else [0, 0]
        assert nwrong == expected, (op, dtype, redop, wrong)
        assert counts[0] > 0, (op, dtype)


def _timing_modes(ctx: RankContext) -> list[tuple[int, float, float]]:
    out = []
    for average in (0, 1, 2, 3):
        cfg = BenchConfig(iters=3, warmup=1, average=average, blocking=1, min_time_s=0.02)
        rows, _ = measure_size(ctx, OPS["all_reduce"], 1024, cfg, DTYPES["float"])
        out.append((average, rows[0].time_us, rows[0].iters))
    return out


def test_times_and_adapted_iterations_agree_on_every_rank() -> None:
    rank0, rank1 = run_on_ranks(_timing_modes, world=2)
    assert rank0 == rank1
    for _, time_us, iters in rank0:
        assert time_us > 0
        assert iters >= 3  # --min-time may raise the count, never lower it


def test_step_labels_say_where_a_rank_is() -> None:
    cfg = BenchConfig(ops=("all_reduce", "broadcast"), min_bytes=8, max_bytes=16, run=RunOptions()).validated()
    assert step_label(cfg, 0).startswith("while starting")
    assert step_label(cfg, 1) == "before all_reduce 8 B"
    assert step_label(cfg, 2) == "at all_reduce 8 B"
    assert step_label(cfg, 5) == "before broadcast 8 B"
    assert step_label(cfg, 99) == "after the last size"


def test_three_ranks_with_root_one() -> None:
    combos = [(op, "float", "max") for op in OPS]
    results = run_on_ranks(_measure_all, world=3, combos=combos, size_bytes=4096)
    for op, _, _, nwrong, _, wrong in results[0]:
        assert nwrong[0] == 0, (op, wrong)
