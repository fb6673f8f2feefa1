"""MLPerf Training MLLOG result files: the steady step time, in both block-logging styles."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.results.mllog import parse_mllog

FIXTURES = Path(__file__).parent.parent / "fixtures" / "mllog"


def test_block_stop_with_the_count_reached() -> None:
    # AMD's callbacks log the samples reached at block_stop: 48 steps of 8 samples per block after the first.
    run = parse_mllog((FIXTURES / "v5.0_amd_mi300x_llama2_70b_lora_result_0.txt").read_text())
    assert (run.global_batch, run.lora_rank, run.benchmark) == (8, 16, "llama2_70b_lora")
    # Second block: 1745906933937 -> 1745907123163 ms over 384 samples.
    assert run.blocks >= 3
    assert run.step_time_s == pytest.approx((1745907123163 - 1745906933937) / 1000 / 48, rel=0.01)


def test_block_stop_with_the_start_count_reads_the_next_eval() -> None:
    # mlperf_common logs the block's start count at block_stop; eval_start then carries the count reached.
    run = parse_mllog((FIXTURES / "v5.0_nvidia_dgxb200_llama2_70b_lora_result_0.txt").read_text())
    assert run.global_batch == 8
    assert run.step_time_s == pytest.approx((1745155354525 - 1745155280501) / 1000 / 48, rel=0.02)


@pytest.mark.parametrize("text", ["", "no log here", ':::MLLOG {"key": "global_batch_size", "value": 8}',
                                  ':::MLLOG {broken', ':::MLLOG []'])
def test_a_file_without_timed_blocks_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError):
        parse_mllog(text, "f.txt")
