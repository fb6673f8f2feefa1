"""Router-like token routing for `bench moe`: which experts, ranks and nodes each token goes to.

Every token picks `topk` distinct experts out of `experts`, sharded evenly over the ranks (expert e lives on rank
e // (experts / world)). With `skew` 0 every expert is equally likely; with skew s the expert of popularity rank i
(1 = hottest) is drawn with weight 1 / i**s (Zipf's law), the hottest ones scattered over the ranks by a seeded
shuffle. The popularity and each rank's tokens come from the seed, so every rank computes the same routing for
the whole world and a rerun moves the same tokens. Sampling without replacement proportional to the weights is
the Gumbel top-k trick: the k largest of log(weight) + Gumbel noise.

A token routed to several experts of one rank travels to that rank once (as DeepEP's dispatch and a
deduplicating all-to-allv do): per source rank, the rows of its send buffer are its tokens, once per distinct
destination rank, in destination order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHUNK_CELLS = 1 << 22
"""Tokens are routed in chunks of at most this many (token, expert) scores, so memory stays bounded."""


@dataclass(frozen=True)
class Routing:
    """The whole world's routing: `counts[s][d]` tokens go from rank s to rank d (once per token)."""

    counts: np.ndarray
    """world x world: tokens rank s sends to rank d (a token counted once per distinct destination rank)."""
    order: tuple[np.ndarray, ...]
    """Per source rank: the token index of each row of its send buffer, grouped by destination rank."""
    ranks_per_token: float
    """Distinct destination ranks per token, the mean over every rank's tokens."""
    nodes_per_token: float
    """Distinct destination nodes per token (the sender's own included when a copy stays there)."""

    @property
    def world(self) -> int:
        """Ranks."""
        return int(self.counts.shape[0])

    def send_splits(self, rank: int) -> list[int]:
        """Rows `rank` sends to each rank (the dispatch's input split sizes)."""
        return [int(v) for v in self.counts[rank]]

    def recv_splits(self, rank: int) -> list[int]:
        """Rows `rank` receives from each rank (the dispatch's output split sizes)."""
        return [int(v) for v in self.counts[:, rank]]

    @property
    def imbalance(self) -> float:
        """The busiest rank's rows over the mean (`load_imbalance`): 1 = even."""
        return load_imbalance(self.counts)


def load_imbalance(counts: np.ndarray | list[list[int]]) -> float:
    """Of a world x world matrix of rows sent from rank s to rank d: the busiest rank's rows (sent or received,
    whichever is larger) over the mean; 1 = even, and 1 where nothing moves."""
    rows = np.asarray(counts)
    load = np.maximum(rows.sum(axis=1), rows.sum(axis=0))
    mean = float(rows.sum()) / rows.shape[0]
    return float(load.max()) / mean if mean > 0 else 1.0


def expert_weights(experts: int, skew: float, seed: int) -> np.ndarray:
    """Each expert's routing weight (summing to 1): uniform at skew 0, Zipf with exponent `skew` otherwise."""
    popularity = np.arange(1, experts + 1, dtype=float) ** -skew
    shuffled = np.random.default_rng(seed).permutation(experts)
    weights = np.empty(experts)
    weights[shuffled] = popularity
    return weights / weights.sum()


def top_experts(rng: np.random.Generator, tokens: int, topk: int, log_weights: np.ndarray) -> np.ndarray:
    """tokens x topk distinct experts per token, drawn without replacement proportional to the weights."""
    experts = len(log_weights)
    chunk = max(1, CHUNK_CELLS // experts)
    out = np.empty((tokens, topk), dtype=np.int64)
    for start in range(0, tokens, chunk):
        n = min(chunk, tokens - start)
        scores = log_weights + rng.gumbel(size=(n, experts))
        out[start:start + n] = np.argpartition(-scores, topk - 1, axis=1)[:, :topk]
    return out


def _destinations(picked: np.ndarray, world: int, per_rank: int) -> np.ndarray:
    """tokens x world booleans: whether a token has at least one expert on each rank."""
    hit = np.zeros((picked.shape[0], world), dtype=bool)
    np.put_along_axis(hit, picked // per_rank, True, axis=1)
    return hit


@dataclass(frozen=True)
class RankRouting:
    """One source rank's tokens: how many go to each rank, and in which order they are sent."""

    send_counts: np.ndarray
    """Rows sent to each rank (a token once per distinct destination rank)."""
    order: np.ndarray
    """The token index of each row of the send buffer, grouped by destination rank."""
    rank_copies: int
    """Copies summed over tokens: distinct destination ranks per token, added up."""
    node_copies: int
    """Distinct destination nodes per token (the sender's own included), added up."""


def route_rank(src: int, tokens_per_rank: int, topk: int, experts: int, world: int, skew: float = 0.0,
               seed: int = 0, ranks_per_node: int | None = None) -> RankRouting:
    """Rank `src`'s tokens routed over `world` ranks (`ranks_per_node` consecutive ranks to a node)."""
    if experts % world:
        raise ValueError(f"{experts} experts do not shard evenly over {world} ranks")
    with np.errstate(divide="ignore"):
        log_weights = np.log(expert_weights(experts, skew, seed))
    rng = np.random.default_rng([seed, src + 1])
    hit = _destinations(top_experts(rng, tokens_per_rank, topk, log_weights), world, experts // world)
    node_of = np.arange(world) // (ranks_per_node or world)
    node_copies = sum(int(hit[:, node_of == n].any(axis=1).sum()) for n in range(int(node_of[-1]) + 1))
    # Column-major nonzero: every token bound for rank 0 first, then rank 1, ...
    return RankRouting(hit.sum(axis=0), np.nonzero(hit.T)[1], int(hit.sum()), node_copies)


def route(tokens_per_rank: int, topk: int, experts: int, world: int, skew: float = 0.0, seed: int = 0,
          ranks_per_node: int | None = None) -> Routing:
    """Every rank's tokens routed over `world` ranks, as each rank computes its own."""
    ranks = [route_rank(src, tokens_per_rank, topk, experts, world, skew, seed, ranks_per_node)
             for src in range(world)]
    total = tokens_per_rank * world
    return Routing(np.stack([r.send_counts for r in ranks]), tuple(r.order for r in ranks),
                   sum(r.rank_copies for r in ranks) / total, sum(r.node_copies for r in ranks) / total)
