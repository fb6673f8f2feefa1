"""The watchdog's other signs: a frozen rank is named even when counters are level; a busy one is waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from linkscope.bench import liveness
from linkscope.bench.launch import stall_message
from linkscope.bench.liveness import Pulse, PulseHistory, keep_waiting, read_local_pulse


def _history(monkeypatch: pytest.MonkeyPatch, readings: list[list[Pulse]], step_s: float = 0.5) -> PulseHistory:
    clock = iter(i * step_s for i in range(len(readings)))
    monkeypatch.setattr(liveness.time, "monotonic", lambda: next(clock))
    history = PulseHistory()
    for pulses in readings:
        history.add(pulses)
    return history


def _where(value: int) -> str:
    return f"at step {value}"


def test_a_rank_whose_heartbeat_stopped_is_named_though_counters_are_level(monkeypatch: pytest.MonkeyPatch) -> None:
    history = _history(monkeypatch, [[Pulse(1.0, 10 + i), Pulse(1.0, 7)] for i in range(6)])
    assert history.frozen() == [1]
    message, ranks = stall_message([5, 5], 4.0, _where, history.frozen())
    assert ranks == [1]
    assert message == "rank 1 stopped making progress for 4 s at step 5; the other ranks waited for it"
    assert not keep_waiting([5, 5], history, 5.0, 120.0)


def test_a_process_the_os_stopped_is_frozen_without_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    history = _history(monkeypatch, [[Pulse(1.0), Pulse(2.0, stopped=True)]] * 3)
    assert history.frozen() == [1]


def test_a_busy_suspect_is_waited_for_until_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    history = _history(monkeypatch, [[Pulse(1.0, i), Pulse(1.0 + 0.4 * i, i)] for i in range(6)])
    assert history.busy() == [1]
    assert keep_waiting([5, 5], history, 5.0, 120.0)  # level counters, rank 1 still computing
    assert keep_waiting([6, 5], history, 5.0, 120.0)  # rank 1 behind but working
    assert not keep_waiting([5, 6], history, 5.0, 120.0)  # rank 0 behind and idle: that is a hang
    assert not keep_waiting([5, 5], history, 121.0, 120.0)


def test_idle_ranks_are_not_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    history = _history(monkeypatch, [[Pulse(1.0, i), Pulse(2.0 + 0.001 * i, i)] for i in range(6)])
    assert history.busy() == [] and history.frozen() == []
    assert not keep_waiting([5, 5], history, 5.0, 120.0)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_a_sigstopped_process_reads_as_stopped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 30
        pulse = read_local_pulse(child.pid)
        while pulse is not None and not pulse.stopped and time.monotonic() < deadline:
            time.sleep(0.05)
            pulse = read_local_pulse(child.pid)
        assert pulse is not None and pulse.stopped
    finally:
        child.kill()
        child.wait()
    assert read_local_pulse(None) is None
