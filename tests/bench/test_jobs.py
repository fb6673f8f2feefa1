"""A reduction the backend refuses at run time becomes a user error, not a crash; rank 0's guarded run turns
what went wrong into the outcome its runner stores."""

from __future__ import annotations

import pytest

from linkscope.bench.config import BenchConfig
from linkscope.bench.events import NullSink
from linkscope.bench.jobs import Job, run_guarded, run_job
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


def test_a_guarded_run_reports_a_refusal_as_a_user_error() -> None:
    status, message = run_guarded(Job("bench", BenchConfig()), _RefusingRank(), NullSink())  # type: ignore[arg-type]
    assert status == "user_error"
    assert "the gloo backend of this torch cannot do that" in message


def test_a_guarded_run_reports_a_fault_with_the_ranks_behind_first() -> None:
    status, message = run_guarded(Job("bench", BenchConfig()), _BrokenRank(), NullSink(),  # type: ignore[arg-type]
                                  lambda: "rank 1 is behind")
    assert (status, message) == ("fault", "rank 1 is behind; rank 0 saw RuntimeError: Connection closed by peer")
    status, message = run_guarded(Job("train", BenchConfig()), _BrokenRank(), NullSink())  # type: ignore[arg-type]
    assert (status, message) == ("fault", "rank 0 saw RuntimeError: Connection closed by peer")
