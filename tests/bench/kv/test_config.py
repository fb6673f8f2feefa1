"""`bench kv`'s inputs: page geometry, the sweep's bounds and the rank count, refused before any rank starts."""

from __future__ import annotations

import pytest

from linkscope.bench.kv.config import KvConfig, check_world
from linkscope.bench.kv.loop import peer_of
from linkscope.hardware.errors import UserError
from tests.cli.helpers import run_cli


def _cfg(**kw: object) -> KvConfig:
    return KvConfig(**{"layers": 80, "kv_heads": 1, "head_dim": 128, "tokens": 8192, **kw})  # type: ignore[arg-type]


def test_a_page_is_a_block_of_every_layer_or_of_one() -> None:
    whole = _cfg(block_tokens=(32,))
    layer = _cfg(block_tokens=(32,), granularity="layer")
    # Llama 3 70B at TP 8: one KV head per rank, 512 bytes per token per layer in bf16.
    assert whole.token_layer_bytes == 512
    assert whole.page_bytes(32) == 32 * 512 * 80 and whole.pages(32) == 256
    assert layer.page_bytes(32) == 32 * 512 and layer.pages(32) == 256 * 80
    assert whole.pages(32) * whole.page_bytes(32) == layer.pages(32) * layer.page_bytes(32)


def test_ranks_pair_prefill_with_decode() -> None:
    assert [peer_of(r, 4) for r in range(4)] == [(True, 2), (True, 3), (False, 0), (False, 1)]


@pytest.mark.parametrize(("cfg", "words"), [
    (_cfg(block_tokens=(0,)), "between 1 and the 8192 tokens"),
    (_cfg(block_tokens=(9000,)), "between 1 and the 8192 tokens"),
    (_cfg(in_flight=(0,)), "--in-flight"),
    (_cfg(granularity="page"), "request, layer"),
    (_cfg(kv_precision="int4"), "bf16"),
    (_cfg(tokens=0), "--tokens"),
    (_cfg(block_tokens=(1,), granularity="layer", in_flight=(8,)), "pages in flight per pair"),
    (_cfg(block_tokens=tuple(range(1, 40)), in_flight=(1, 2)), "points in one run"),
])
def test_bad_geometry_is_refused(cfg: KvConfig, words: str) -> None:
    with pytest.raises(UserError, match=words):
        cfg.validated()


@pytest.mark.parametrize("world", [1, 3])
def test_an_odd_world_has_no_pairs(world: int) -> None:
    with pytest.raises(UserError, match="even number of ranks"):
        check_world(world)


@pytest.mark.parametrize(("extra", "words"), [
    (["--nproc", "3", "--oversubscribe"], "even number of ranks"),
    (["--tokens", "1000000", "--in-flight", "1000", "--block-tokens", "4096"], "host memory"),
    (["--block-tokens", "a,b"], "--block-tokens"),
    (["--model", "no-such-model"], "no-such-model"),
])
def test_the_command_refuses_with_one_line_and_never_forks(extra: list[str], words: str, tmp_path) -> None:
    result = run_cli("bench", "kv", "--backend", "gloo", "--db", str(tmp_path / "r.db"), *extra)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
