"""Router-like routing of `bench moe`: every rank agrees, a token travels once per destination rank, skew makes
some ranks busier, and the uniform case matches the model's expectation of distinct destinations."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.bench.moe.routing import expert_weights, route, route_rank, top_experts
from linkscope.model.comm.moe import MoeRequest, destinations


def test_each_token_picks_distinct_experts() -> None:
    picked = top_experts(np.random.default_rng(1), 500, 8, np.log(expert_weights(64, 1.0, 0)))
    assert picked.shape == (500, 8)
    assert all(len(set(row)) == 8 for row in picked.tolist())


def test_the_same_seed_routes_the_same_tokens_on_every_rank() -> None:
    a = route(256, 4, 32, 4, skew=0.8, seed=3)
    b = route(256, 4, 32, 4, skew=0.8, seed=3)
    assert np.array_equal(a.counts, b.counts)
    assert all(np.array_equal(x, y) for x, y in zip(a.order, b.order))
    assert not np.array_equal(a.counts, route(256, 4, 32, 4, skew=0.8, seed=4).counts)
    # One rank computing only its own tokens gets what the whole world's routing says about it.
    mine = route_rank(2, 256, 4, 32, 4, skew=0.8, seed=3)
    assert np.array_equal(mine.send_counts, a.counts[2]) and np.array_equal(mine.order, a.order[2])


def test_a_token_with_two_experts_on_one_rank_travels_there_once() -> None:
    # Two ranks of two experts each, top-2: a token goes to one or both ranks, never twice to one.
    r = route(1000, 2, 4, 2, seed=0)
    for src in range(2):
        order = r.order[src]
        assert len(order) == r.counts[src].sum()
        bound = np.split(order, np.cumsum(r.counts[src])[:-1])
        assert all(len(set(part.tolist())) == len(part) for part in bound)  # no token twice to one rank
    assert 1.0 <= r.ranks_per_token <= 2.0
    # topk = every expert: each token reaches every rank exactly once.
    every = route(100, 4, 4, 2, seed=0)
    assert every.counts.tolist() == [[100, 100], [100, 100]] and every.ranks_per_token == 2.0


def test_uniform_routing_matches_the_models_expected_destinations() -> None:
    r = route(4096, 8, 256, 8, seed=0, ranks_per_node=4)
    ranks, nodes, _, _ = destinations(MoeRequest(ep=8, tokens_per_rank=4096, hidden=16, topk=8, experts=256), 4)
    assert r.ranks_per_token == pytest.approx(ranks, rel=0.02)
    assert r.nodes_per_token == pytest.approx(nodes, rel=0.02)
    assert r.imbalance < 1.05


def test_skew_makes_the_busiest_rank_busier() -> None:
    flat = route(2048, 2, 32, 4, skew=0.0, seed=0)
    hot = route(2048, 2, 32, 4, skew=1.5, seed=0)
    assert hot.imbalance > flat.imbalance


def test_experts_must_shard_evenly() -> None:
    with pytest.raises(ValueError, match="shard evenly"):
        route_rank(0, 8, 2, 6, 4)
