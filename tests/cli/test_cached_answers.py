"""Commands answer the same whether the shipped data is validated afresh or read back from the cache between
starts (hardware/built_cache.py), and with the cache turned off."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware import parsed_cache
from tests.cli.helpers import forget_packaged_data, run_cli

COMMANDS = [
    ["predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--json"],
    ["predict", "train", "-s", "dgx-a100", "-m", "llama2-70b", "--gpus", "64", "--json"],
    ["predict", "train", "-s", "aws/p5.48xlarge", "-m", "llama3-8b", "--gpus", "16", "--json"],
    ["predict", "infer", "-s", "hgx-h200", "-m", "llama3.1-70b", "--precision", "fp8", "--tp", "2", "--json"],
    ["predict", "collective", "-s", "dgx-a100", "--op", "all_reduce", "--sweep", "--json"],
    ["predict", "moe", "-s", "dgx-h100", "--tokens-per-rank", "4096", "--hidden", "7168", "--topk", "8",
     "--experts", "256", "--ep", "16", "--json"],
    ["catalog", "--gpu", "H100", "--json"],
    ["systems", "show", "dgx-h100", "--json"],
    ["advise", "infer", "-m", "llama3.1-70b", "--latency-budget", "30", "--json"],
    ["predict", "train", "-s", "no-such-system", "-m", "llama2-7b"],
]


def _answers() -> list[tuple[int, str]]:
    answers = []
    for args in COMMANDS:
        forget_packaged_data()
        result = run_cli(*args)
        answers.append((result.exit_code, result.stdout))
    forget_packaged_data()
    return answers


def test_cold_warm_and_uncached_answers_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    cold = _answers()
    assert list((tmp_path / "cache" / "built").glob("hardware-*.pickle"))
    warm = _answers()
    monkeypatch.setenv(parsed_cache.CACHE_DIR_ENV, "")
    uncached = _answers()
    assert [code for code, _ in cold][:-1] == [0] * (len(COMMANDS) - 1) and cold[-1][0] == 2
    assert warm == cold and uncached == cold
