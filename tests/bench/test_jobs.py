"""A reduction the backend refuses at run time becomes a user error, not a crash."""

from __future__ import annotations

import pytest

from linkscope.bench.config import BenchConfig
from linkscope.bench.events import NullSink
from linkscope.bench.jobs import Job, run_job
from linkscope.hardware.errors import UserError


class _RefusingRank:
    backend = "gloo"
    rank = 0

    def gather_infos(self) -> list:
        raise RuntimeError("Cannot use ReduceOp.AVG with Gloo")


class _BrokenRank(_RefusingRank):
    def gather_infos(self) -> list:
        raise RuntimeError("Connection closed by peer")


def test_backend_refusal_is_a_user_error() -> None:
    with pytest.raises(UserError, match="the gloo backend of this torch cannot do that"):
        run_job(Job("bench", BenchConfig()), _RefusingRank(), NullSink())  # type: ignore[arg-type]


def test_other_runtime_errors_stay_faults() -> None:
    with pytest.raises(RuntimeError, match="Connection closed"):
        run_job(Job("bench", BenchConfig()), _BrokenRank(), NullSink())  # type: ignore[arg-type]
