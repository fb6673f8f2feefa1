"""What "best" means: the objective (total cost or total time of the same task) and the hard limits.

Like SkyPilot's optimizer, there are two targets, cost and time; unlike it, the time comes from the model of
the job on each offering's interconnect, so a cheap node on a slow network is not ranked by price alone.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from linkscope.hardware.errors import UserError

DEFAULT_DEADLINE_S = 90 * 86400.0
"""The deadline a plan is held to when the user names none: a quarter, what a team would still wait for a
pre-training run. Without one, the cheapest plan is a single node for years (cost barely moves with the node
count); `--deadline none` removes it."""
MAX_DEADLINE_S = 10 * 365 * 86400.0
"""A deadline beyond ten years is a typo, not a plan (`--deadline none` is the way to have no deadline)."""

COST_TIE = 0.05
"""Across GPU counts of one offering, costs within 5% of the cheapest count are a tie, settled by time:
paying a few percent more to finish several times sooner is what anyone minimising cost would still take."""


class Objective(str, enum.Enum):
    """What the ranking minimises."""

    COST = "cost"
    TIME = "time"


def parse_objective(text: str) -> Objective:
    """`cost` or `time` (UserError otherwise)."""
    try:
        return Objective(text.strip().lower())
    except ValueError:
        raise UserError(f"unknown objective '{text}' (choose cost or time)", field="objective") from None


@dataclass(frozen=True)
class Limits:
    """Hard limits on one training run; None = no limit. A plan meets the deadline when the p90 of its time to
    train does (a p10..p90 range is a promise: 9 in 10 runs finish by its p90), not merely its central value."""

    deadline_s: float | None = None
    budget_usd: float | None = None
    deadline_is_default: bool = False
    """The deadline is DEFAULT_DEADLINE_S because the user gave none (the header says so)."""
    deadline_given: str | None = None
    """The deadline in the unit it was given (`0.0001 s`, `30 d`), for every line that names it."""

    def deadline_text(self) -> str:
        """The deadline as given, else in days or hours."""
        if self.deadline_given:
            return self.deadline_given
        return _days(self.deadline_s) if self.deadline_s is not None else "none"

    def misses(self, p90_s: float, cost_usd: float | None, central_s: float | None = None) -> list[str]:
        """Why a plan breaks the limits, in words (empty when it keeps them): its p90 time to train against the
        deadline (its central value named too), its cost against the budget."""
        reasons = []
        if self.deadline_s is not None and p90_s > self.deadline_s:
            central = f", central {_days(central_s)}" if central_s is not None else ""
            reasons.append(f"misses the deadline (p90 {_days(p90_s)}{central} > {self.deadline_text()})")
        if self.budget_usd is not None:
            if cost_usd is None:
                reasons.append("price unknown, so the budget cannot be checked")
            elif cost_usd > self.budget_usd:
                reasons.append(f"over budget (${cost_usd:,.0f} > ${self.budget_usd:,.0f})")
        return reasons

    def excess(self, p90_s: float, cost_usd: float | None) -> float:
        """How far past the limits, as a sum of relative overshoots (0 when within): ranks the near misses."""
        over = 0.0
        if self.deadline_s is not None:
            over += max(p90_s / self.deadline_s - 1.0, 0.0)
        if self.budget_usd is not None:
            over += math.inf if cost_usd is None else max(cost_usd / self.budget_usd - 1.0, 0.0)
        return over


def _days(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 86400:.1f} d" if seconds >= 86400 else f"{seconds / 3600:.1f} h"


def rank_key(objective: Objective, time_s: float, cost_usd: float | None) -> tuple[float, float, float]:
    """Sort key: by cost (unknown prices last, then by time) or by time (then cost)."""
    cost = math.inf if cost_usd is None else cost_usd
    if objective is Objective.TIME:
        return (time_s, cost, 0.0)
    return (float(cost_usd is None), cost, time_s)
