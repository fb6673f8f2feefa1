"""The time-cost frontier: which plans no other plan beats on both, and how a long frontier is shortened."""

from __future__ import annotations

import math

from linkscope.advise.frontier import pareto, roles, thin


def _front(points: list[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    return pareto(points, lambda p: p[0], lambda p: p[1])


def test_dominated_plans_leave_the_frontier_and_it_runs_cheapest_first() -> None:
    # (time, cost): (3, 12) is beaten by (2, 10); (5, 10) by (2, 10); (1, 20) and (8, 5) are the ends.
    points = [(3.0, 12.0), (2.0, 10.0), (5.0, 10.0), (1.0, 20.0), (8.0, 5.0)]
    assert _front(points) == [(8.0, 5.0), (2.0, 10.0), (1.0, 20.0)]


def test_unknown_or_non_finite_figures_stay_off_the_frontier() -> None:
    points = [(4.0, None), (2.0, math.nan), (math.inf, 1.0), (3.0, 3.0)]
    assert _front(points) == [(3.0, 3.0)]
    assert _front([]) == []


def test_a_tie_keeps_one_point() -> None:
    assert _front([(2.0, 5.0), (2.0, 5.0), (2.0, 6.0)]) == [(2.0, 5.0)]


def test_thinning_keeps_both_ends() -> None:
    front = list(range(10))
    assert thin(front, 4) == [0, 3, 6, 9]
    assert thin(front, 2) == [0, 9] and thin(front, 1) == [0] and thin(front, 20) == front


def test_thinning_in_log_time_counts_a_crowd_of_near_equal_points_once() -> None:
    # Times 1000 s down to 10 s, then four points within 1% of 10 s (each only a little faster, much dearer).
    times = [1000.0, 300.0, 100.0, 30.0, 10.0, 9.98, 9.96, 9.94, 9.92]
    assert thin(times, 5, lambda t: t) == [1000.0, 300.0, 100.0, 30.0, 9.92]


def test_roles_name_the_two_ends() -> None:
    assert roles(3) == ["cheapest", "between", "fastest"] and roles(2) == ["cheapest", "fastest"]
    assert roles(1) == ["cheapest, fastest"] and roles(0) == []
