"""M/D/c waits: exact for one server, fewer waits with more servers, none past full load."""

from __future__ import annotations

import math

import pytest

from linkscope.model.step.queueing import erlang_c, md_c_wait_s


@pytest.mark.parametrize("load", [0.1, 0.5, 0.8, 0.95])
def test_one_server_is_pollaczek_khinchine(load: float) -> None:
    service_s = 0.3
    assert md_c_wait_s(load / service_s, 1, service_s) == pytest.approx(load * service_s / (2 * (1 - load)))


def test_erlang_c_of_one_server_is_its_load() -> None:
    assert erlang_c(1, 0.7) == pytest.approx(0.7)


def test_more_servers_at_the_same_load_wait_less() -> None:
    waits = [md_c_wait_s(0.8 * c / 1.0, c, 1.0) for c in (1, 4, 64, 4096)]
    assert waits == sorted(waits, reverse=True) and waits[-1] < 1e-6


def test_full_load_never_drains_and_no_traffic_never_waits() -> None:
    assert math.isinf(md_c_wait_s(2.0, 2, 1.0))
    assert md_c_wait_s(0.0, 3, 1.0) == 0.0
