"""Waiting for a server: requests arrive at random (Poisson) and each takes a fixed time (M/D/c).

Serving engines see requests arrive independently of each other, and a prefill or a decode slot takes a time set by
the request's length, not by chance: an M/D/c queue. Its mean wait has no closed form; half the M/M/c wait
(Erlang C) is the classic approximation for deterministic service (exact for one server, the Pollaczek-Khinchine
formula, and within a few percent at moderate load for more).
"""

from __future__ import annotations

import math

import numpy as np

MAX_SERVERS = 1_000_000
"""Slots beyond this are counted as this many (the wait there is nil at any load below 1)."""


def erlang_c(servers: int, offered: float) -> float:
    """The chance an arrival waits in an M/M/c queue with `servers` servers and `offered` = arrival rate x
    service time (< servers): the Poisson(offered) weight at `servers` scaled by c / (c - a), over the weights
    below it plus that, summed in log space so that thousands of servers neither overflow nor cost a loop."""
    if offered <= 0:
        return 0.0
    c = min(servers, MAX_SERVERS)
    offered = offered * c / servers  # the same load on fewer servers past the cap: a longer wait, never shorter
    k = np.arange(c + 1, dtype=float)
    log_weight = k * math.log(offered) - np.concatenate(([0.0], np.cumsum(np.log(k[1:]))))
    top = log_weight[-1] + math.log(c / (c - offered))
    peak = max(float(log_weight.max()), top)
    below = float(np.exp(log_weight[:-1] - peak).sum())
    waits = math.exp(top - peak)
    return waits / (below + waits)


def md_c_wait_s(arrival_per_s: float, servers: int, service_s: float) -> float:
    """Mean wait before service in an M/D/c queue (seconds); infinity at or above full load."""
    if arrival_per_s <= 0 or service_s <= 0:
        return 0.0
    offered = arrival_per_s * service_s
    if offered >= servers:
        return math.inf
    mm_c = erlang_c(servers, offered) * service_s / (servers - offered)
    return 0.5 * mm_c
