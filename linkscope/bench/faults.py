"""Deliberate faults for the test suite: a rank that exits, hangs, or corrupts one result element.

Only active when the environment variable LINKSCOPE_TEST_FAULT holds a JSON object such as
`{"action": "exit", "rank": 1, "op": "all_reduce", "size": 4096}`. Nothing in linkscope sets it; the
tests do, to prove that a dead rank, a hung rank and a wrong result are each caught and reported.
`action` is `exit` (the rank exits with code 17), `hang` (it sleeps, forever or for `seconds`), `spin`
(it computes for `seconds`, as a slow step on a loaded machine does) or `corrupt` (one element of its checked
output is changed). `op` and `size` select where; missing
means anywhere.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import torch

ENV_VAR = "LINKSCOPE_TEST_FAULT"
EXIT_CODE = 17


@dataclass(frozen=True)
class Fault:
    """One injected fault."""

    action: str
    rank: int
    op: str | None = None
    size: int | None = None
    seconds: float | None = None

    def matches(self, rank: int, op: str, size_bytes: int) -> bool:
        """Whether this fault fires for this rank, op and size."""
        return (
            rank == self.rank
            and (self.op is None or self.op == op)
            and (self.size is None or self.size == size_bytes)
        )


def active_fault() -> Fault | None:
    """The fault the test suite asked for, if any."""
    raw = os.environ.get(ENV_VAR)
    if not raw:
        return None
    spec = json.loads(raw)
    return Fault(spec["action"], int(spec["rank"]), spec.get("op"), spec.get("size"), spec.get("seconds"))


def before_size(rank: int, op: str, size_bytes: int) -> None:
    """Exit or hang here if the test suite asked for it."""
    fault = active_fault()
    if fault is None or not fault.matches(rank, op, size_bytes):
        return
    if fault.action == "exit":
        os._exit(EXIT_CODE)
    if fault.action == "hang":
        end = time.monotonic() + (fault.seconds if fault.seconds is not None else float("inf"))
        while time.monotonic() < end:
            time.sleep(min(1.0, end - time.monotonic()))
    if fault.action == "spin":
        end = time.monotonic() + (fault.seconds or 0.0)
        while time.monotonic() < end:
            sum(range(10_000))


def corrupt_output(output: torch.Tensor, rank: int, op: str, size_bytes: int) -> None:
    """Change one element of a checked result if the test suite asked for it."""
    fault = active_fault()
    if fault is None or fault.action != "corrupt" or not fault.matches(rank, op, size_bytes):
        return
    if output.numel() == 0:
        return
    middle = output.numel() // 2
    output[middle] = 1 if output[middle].item() == 0 else 0


SLOW_SEND_ENV = "LINKSCOPE_TEST_SLOW_SEND_S"
"""Test hook for `check --fleet`: when this variable holds a number of seconds, every message this process sends in
the fleet's node-pair rounds is held back that long first, as a slow NIC or cable would hold it. The tests set it
in the environment of one torchrun agent only, so one node is slow; nothing in linkscope sets it."""


def slow_send() -> None:
    """Hold this node's next pair-round send back, if the test suite asked for a slow node."""
    raw = os.environ.get(SLOW_SEND_ENV)
    if raw:
        time.sleep(max(0.0, min(float(raw), 10.0)))
