"""A job's defaults: the global batch and sequence length when the user gives neither."""

from __future__ import annotations

import pytest

from linkscope.model.step.job import batch_and_length, default_global_batch


def test_default_global_batch_is_about_four_million_tokens() -> None:
    assert default_global_batch(4096) == 1024
    assert default_global_batch(2048) == 2048
    assert default_global_batch(3000) * 3000 == pytest.approx(4 * 2**20, rel=0.5)
    assert default_global_batch(2**23) == 1


def test_a_given_batch_and_length_are_kept_and_missing_ones_defaulted() -> None:
    assert batch_and_length(4096, None, None) == (1024, 4096)
    assert batch_and_length(4096, 64, 8192) == (64, 8192)
    assert batch_and_length(4096, None, 2048) == (2048, 2048)
