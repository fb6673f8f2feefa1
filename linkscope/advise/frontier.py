"""The time–cost frontier: the plans that no other plan beats on both time and cost.

Ranked by total cost with a free node count, the cheapest plan is nearly always the smallest one: cost barely moves
with the node count while time falls, so "cheapest" means a single node for years. The seeds ask to decide by the
total time *and* the total cost of the same task, and the answer to that is a frontier: the cheapest plan, the
fastest, and every plan between them where finishing sooner costs more. A plan off the frontier is beaten by one
that is both faster and cheaper, so nobody should rent it for this job.

Plans with an unknown price have no place on a cost frontier; they are left out of it (and listed elsewhere).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

CHEAPEST = "cheapest"
FASTEST = "fastest"
BETWEEN = "between"
"""A frontier point between the two ends: faster than the cheapest, cheaper than the fastest."""


def pareto(items: Sequence[T], time_s: Callable[[T], float | None], cost: Callable[[T], float | None]) -> list[T]:
    """The items no other item beats on both time and cost, cheapest (slowest) first.

    An item ties with another of equal time and cost only when it comes first in `items`; unknown or non-finite
    times and costs are left out."""
    known = [(i, t, c) for i, t, c in ((i, time_s(i), cost(i)) for i in items)
             if t is not None and c is not None and math.isfinite(t) and math.isfinite(c)]
    known.sort(key=lambda x: (x[1], x[2]))
    front: list[T] = []
    cheapest = math.inf
    for item, _, c in known:
        if c < cheapest:
            front.append(item)
            cheapest = c
    return front[::-1]


def thin(front: list[T], keep: int, time_s: Callable[[T], float | None] | None = None) -> list[T]:
    """At most `keep` points of a frontier (cheapest first): always its two ends, the rest evenly spread in
    log time when `time_s` is given (so a run of points that buy a fraction of a percent each counts once), else
    by position."""
    if keep >= len(front):
        return list(front)
    if keep <= 1:
        return front[:1]
    if time_s is None:
        step = (len(front) - 1) / (keep - 1)
        return [front[round(k * step)] for k in range(keep)]
    logs = [math.log(max(time_s(p) or 0.0, 1e-300)) for p in front]
    chosen = {0, len(front) - 1}
    for k in range(1, keep - 1):
        target = logs[0] + (logs[-1] - logs[0]) * k / (keep - 1)
        free = [i for i in range(len(front)) if i not in chosen]
        if free:
            chosen.add(min(free, key=lambda i: abs(logs[i] - target)))
    return [front[i] for i in sorted(chosen)]


def roles(count: int) -> list[str]:
    """What each point of a frontier of `count` points is called: the first the cheapest, the last the fastest,
    the rest between them."""
    if count == 0:
        return []
    if count == 1:
        return [f"{CHEAPEST}, {FASTEST}"]
    return [CHEAPEST] + [BETWEEN] * (count - 2) + [FASTEST]
