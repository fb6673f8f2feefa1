"""The launcher's watchdog: start-up has its own limit, and the stall clock starts once every rank is ready."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import pytest

from linkscope.bench import launch


@dataclass
class _FakeProc:
    exitcode: int | None = None


def _where(value: int) -> str:
    return f"at step {value}"


def _watch(progress: list[int], stage: list[int] | None = None) -> launch._Watch:
    return launch._Watch([_FakeProc() for _ in progress], queue.Queue(), progress, lambda m, a: None, stage)


def test_a_rank_that_never_gets_ready_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "STARTUP_MIN_S", 0.5)
    outcome = launch._monitor(_watch([1, 0, 1]), 0.1, _where)
    assert outcome.status == "fault" and outcome.ranks == [1]
    assert outcome.message.startswith("rank 1 did not finish start-up") and "0.5 s" in outcome.message


def test_a_rank_still_importing_is_blamed_not_those_waiting_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "STARTUP_MIN_S", 0.3)
    outcome = launch._monitor(_watch([0, 0, 0], stage=[1, 0, 1]), 0.1, _where)
    assert outcome.ranks == [1]
    assert outcome.message == "rank 1 did not finish start-up (importing torch) within 0.3 s"
    waiting = launch._monitor(_watch([0, 0], stage=[1, 1]), 0.1, _where)
    assert waiting.message == "ranks 0, 1 did not finish start-up (joining the process group) within 0.3 s"


def test_slow_start_up_does_not_count_against_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "STARTUP_MIN_S", 30.0)
    progress = [0, 0]

    def ranks() -> None:
        time.sleep(1.0)  # start-up far longer than the 0.3 s timeout
        progress[0] = progress[1] = 1
        time.sleep(0.1)
        progress[0] = 2  # rank 0 enters the next size; rank 1 never does

    threading.Thread(target=ranks, daemon=True).start()
    start = time.monotonic()
    outcome = launch._monitor(_watch(progress), 0.3, _where)
    assert outcome.status == "fault" and outcome.ranks == [1]
    assert outcome.message.startswith("rank 1 stopped making progress for 0.3 s at step 1")
    assert 1.0 < time.monotonic() - start < 20


def test_start_up_limit_is_generous() -> None:
    assert launch.startup_limit_s(4.0) >= 120.0
    assert launch.startup_limit_s(600.0) == 600.0
