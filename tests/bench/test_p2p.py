"""The pairwise matrix on local gloo ranks."""

from __future__ import annotations

from pathlib import Path

from linkscope.bench.config import P2PConfig, RunOptions
from linkscope.bench.p2p import matrix
from linkscope.bench.runner import run_p2p
from linkscope.results.records import PairRow
from linkscope.results.store import ResultStore


def test_three_ranks_give_every_ordered_pair(tmp_path: Path) -> None:
    cfg = P2PConfig(size_bytes=64 * 1024, iters=3, warmup=1, latency_iters=5,
                    run=RunOptions(nproc=3, db_path=str(tmp_path / "r.db"), quiet=True, oversubscribe=True))
    result = run_p2p(cfg, emit=lambda line: None)
    assert (result.status, result.exit_code) == ("complete", 0)
    pairs = {(r.src, r.dst): r for r in result.pair_rows}
    assert set(pairs) == {(s, d) for s in range(3) for d in range(3) if s != d}
    for row in pairs.values():
        assert row.uni_gb_per_s and row.uni_gb_per_s > 0
        assert row.bi_gb_per_s and row.bi_gb_per_s > 0
        assert row.latency_us and row.latency_us > 0
    # Bidirectional and latency are one measurement per unordered pair.
    assert pairs[(0, 2)].bi_gb_per_s == pairs[(2, 0)].bi_gb_per_s
    store = ResultStore(tmp_path / "r.db")
    assert store.get_run(result.run_id).kind == "p2p"
    assert len(store.pair_rows(result.run_id)) == 6


def test_matrix_has_an_empty_diagonal() -> None:
    rows = [PairRow(0, 1, 8, 1.5, 3.0, 10.0), PairRow(1, 0, 8, 1.4, 3.0, 10.0)]
    assert matrix(rows, 2, "uni_gb_per_s") == [[None, 1.5], [1.4, None]]
    assert matrix(rows, 2, "latency_us")[1][0] == 10.0
