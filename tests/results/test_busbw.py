"""busbw and algbw of imported rows agree with nccl-tests' formulas (collectives.md 1.4)."""

from __future__ import annotations

import pytest

from linkscope.results.busbw import algbw_gb_per_s, bus_factor
from linkscope.results.nccltests import parse_nccl_tests_text
from tests.results.helpers import CONCATENATED, PRE_2_13, V2_13, V2_17_CUT

FIXTURES = [V2_13, PRE_2_13, V2_17_CUT, CONCATENATED]
PRINTED = 0.005
"""nccl-tests prints algbw and busbw with 2 decimals (below 1000 GB/s): each is off by up to half a unit."""


def rows_of(path):
    return parse_nccl_tests_text(path.read_text(), path.name).rows


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_busbw_is_algbw_times_the_collective_factor(path):
    rows = [r for r in rows_of(path) if r.algbw < 1000]
    assert rows
    for r in rows:
        factor = bus_factor(r.op, r.world_size)
        assert abs(r.busbw - r.algbw * factor) <= PRINTED * (1 + factor) + 1e-9, r


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_algbw_is_size_over_time(path):
    # Only rows whose printed time and algbw carry enough digits for a 2% check.
    rows = [r for r in rows_of(path) if r.time_us >= 10 and r.algbw >= 0.5]
    assert rows
    for r in rows:
        assert algbw_gb_per_s(r.size_bytes, r.time_us) == pytest.approx(r.algbw, rel=0.02), r


def test_factors():
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 16) == pytest.approx(15 / 16)
    assert bus_factor("all_to_all", 2) == pytest.approx(0.5)
    assert bus_factor("broadcast", 8) == bus_factor("sendrecv", 2) == 1.0
    assert bus_factor("all_reduce", 1) == 0.0 and bus_factor("reduce", 1) == 1.0
    with pytest.raises(ValueError):
        bus_factor("unknown", 2)
    with pytest.raises(ValueError):
        bus_factor("all_reduce", 0)


def test_the_bench_and_the_model_take_the_one_convention() -> None:
    import numpy as np

    from linkscope.bench.ops import OPS
    from linkscope.results.busbw import OP_TO_BINARY, bus_factors

    ranks = np.arange(1, 17)
    for op, spec in OPS.items():
        assert spec.perf_name == OP_TO_BINARY[op]
        assert [spec.bus_factor(int(n)) for n in ranks] == [bus_factor(op, int(n)) for n in ranks]
        assert np.allclose(bus_factors(op, ranks), [bus_factor(op, int(n)) for n in ranks])
