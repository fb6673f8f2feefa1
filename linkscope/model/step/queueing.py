"""Waiting for a server: requests arrive at random (Poisson) and each takes a fixed time (M/D/c).

Serving engines see requests arrive independently of each other, and a prefill or a decode slot takes a time set by
the request's length, not by chance: an M/D/c queue. Its mean wait has no closed form; half the M/M/c wait
(Erlang C) is the classic approximation for deterministic service (exact for one server, the Pollaczek-Khinchine
formula, and within a few percent at moderate load for more).
"""

from __future__ import annotations

import math

MAX_SERVERS = 10_000_000
"""Slots beyond this are not counted one by one (the wait there is nil at any load below 1)."""


def erlang_c(servers: int, offered: float) -> float:
    """The chance an arrival waits in an M/M/c queue with `servers` servers and `offered` = arrival rate x
    service time (< servers), by Erlang B's recurrence (stable for thousands of servers)."""
    blocking = 1.0
    for k in range(1, min(servers, MAX_SERVERS) + 1):
        blocking = offered * blocking / (k + offered * blocking)
    load = offered / servers
    return blocking / (1.0 - load * (1.0 - blocking))


def md_c_wait_s(arrival_per_s: float, servers: int, service_s: float) -> float:
    """Mean wait before service in an M/D/c queue (seconds); infinity at or above full load."""
    if arrival_per_s <= 0 or service_s <= 0:
        return 0.0
    offered = arrival_per_s * service_s
    if offered >= servers:
        return math.inf
    mm_c = erlang_c(servers, offered) * service_s / (servers - offered)
    return 0.5 * mm_c
