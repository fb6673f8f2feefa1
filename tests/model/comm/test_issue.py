"""nccl-tests' host floor: an operation of a back-to-back loop takes at least the host time that issues it."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.comm.collectives import collective_time
from linkscope.model.comm.issue import issue_floor_us, issued_time_us
from linkscope.model.comm.params import comm_fit, comm_fit_override, with_nvls_fit
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.fidelity.comm_fit import PricedCollectives
from linkscope.model.fidelity.evidence import CollectiveEntry


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def test_one_thread_driving_eight_gpus_issues_eight_calls_per_operation() -> None:
    call = comm_fit().nccl_call_host_us
    assert issue_floor_us(1) == pytest.approx(call)
    assert issue_floor_us(8) == pytest.approx(8 * call)
    times = np.array([1.0, 100.0 * call])
    assert issued_time_us(times, 8).tolist() == pytest.approx([8 * call, 100.0 * call])


def test_a_small_all_reduce_from_one_thread_is_host_bound_and_says_so(db: HardwareDB) -> None:
    system = db.systems["dgx-h100"]
    gpu_us = float(collective_time("all_reduce", comm_tiers(system), [8192], 8, 1).time_us[0])
    per_gpu = predict_sizes(system, "all_reduce", [8192, 1 << 30])
    one_thread = predict_sizes(system, "all_reduce", [8192, 1 << 30], gpus_per_thread=8)
    # One process per GPU: the GPUs set the pace (one call is far shorter than a ring's 14 hops).
    assert per_gpu[0].time_us == pytest.approx(gpu_us)
    assert per_gpu[0].bottleneck == "latency"
    # One thread issuing eight calls: the host does, and the row's bandwidth follows the longer time.
    assert one_thread[0].time_us == pytest.approx(issue_floor_us(8)) and issue_floor_us(8) > gpu_us
    assert one_thread[0].bottleneck == "host (issuing 8 GPUs from one thread)"
    assert one_thread[0].busbw < per_gpu[0].busbw
    # A large buffer is bound by the links either way.
    assert one_thread[1].time_us == pytest.approx(per_gpu[1].time_us)
    assert one_thread[1].bottleneck == per_gpu[1].bottleneck


def test_a_single_rank_takes_no_time_whatever_the_threads(db: HardwareDB) -> None:
    row = predict_sizes(db.systems["dgx-a100"], "all_reduce", [8192], gpus=1, gpus_per_thread=8)[0]
    assert row.time_us == 0.0


def test_the_fit_pins_the_call_time_only_where_the_floor_binds(db: HardwareDB) -> None:
    def entry(source: str, gpus_per_thread: int, value: float, size: int = 8) -> CollectiveEntry:
        return CollectiveEntry(source=source, system="dgx-a100", op="all_reduce", gpus=8, size_bytes=size,
                               metric="time_us", value=value, where="test", gpus_per_thread=gpus_per_thread)

    # Two one-thread sweeps whose 8-byte rows took 8 x 4.5 us and 8 x 5.5 us: each source weighs the same, so the
    # fit lands between them; a one-process-per-GPU entry alone leaves the prior.
    priced = PricedCollectives([entry("a", 8, 36.0), entry("b", 8, 44.0), entry("c", 1, 15.0)], db)
    fitted = priced.fit()
    assert 4.5 <= fitted.nccl_call_host_us <= 5.5
    alone = priced.fit(keep=lambda e: e.source == "c")
    assert alone.nccl_call_host_us == comm_fit().prior_nccl_call_host_us
    with comm_fit_override(with_nvls_fit(0.0, 0.0, call_host_us=4.5)):
        assert predict_sizes(db.systems["dgx-a100"], "all_reduce", [8], gpus_per_thread=8)[0].time_us == 36.0
