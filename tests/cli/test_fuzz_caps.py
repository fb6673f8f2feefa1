"""Every numeric option of the measuring commands has a bound: out of range, NaN or infinite is one line and exit 2,
refused before any rank is spawned or any run stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.bench import launch
from tests.cli.test_fuzz import assert_clean, invoke

OUT_OF_RANGE = ["-1", "1e23", "99999999999999999999999", "nan", "inf", "-inf"]
TRAIN = ["bench", "train", "-m", "llama2-7b", "--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "128",
         "--seq-len", "32"]
MOE = ["bench", "moe", "--tokens-per-rank", "64", "--hidden", "64", "--topk", "2", "--experts", "4"]
KV = ["bench", "kv", "--tokens", "64", "--block-tokens", "16", "--in-flight", "1"]
CASES = {
    "bench": (["bench"], ["-n", "-w", "--repeat", "--min-time", "--timeout", "--nproc", "-c"]),
    "p2p": (["p2p"], ["-n", "-w", "--latency-iters", "--timeout", "--nproc"]),
    "train": (TRAIN, ["-n", "-w", "--repeat", "--bucket-mb", "--timeout", "--nproc", "--dp", "--profile-steps",
                      "--micro-batch", "--ep"]),
    "check": (["check"], ["--nproc", "--timeout"]),
    "moe": (MOE, ["-n", "-w", "--timeout", "--nproc", "--tokens-per-rank", "--hidden", "--topk", "--experts",
                  "--skew", "--seed"]),
    "kv": (KV, ["-n", "-w", "--timeout", "--nproc", "--tokens", "--layers", "--kv-heads", "--head-dim", "--tp"]),
}


@pytest.fixture(autouse=True)
def _nothing_spawned(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a rank was spawned for an input that should have been refused")

    # The runners first (setting by name imports them): a runner imported while `launch` is patched would bind
    # `refuse` as its own launch_local, and undoing the patch would then restore `refuse` for later tests.
    monkeypatch.setattr("linkscope.bench.runner.launch_local", refuse)
    monkeypatch.setattr("linkscope.bench.train.runner.launch_local", refuse)
    monkeypatch.setattr("linkscope.bench.recorded.launch_local", refuse)
    monkeypatch.setattr(launch, "launch_local", refuse)


@pytest.mark.parametrize("command", sorted(CASES))
def test_out_of_range_numbers_are_refused_before_anything_runs(command: str, tmp_path: Path) -> None:
    args, flags = CASES[command]
    db = tmp_path / "r.db"
    for flag in flags:
        for value in OUT_OF_RANGE + (["0"] if flag not in ("--min-time", "-w", "-c", "--profile-steps", "--skew",
                                                           "--seed") else []):
            result = invoke(*args, flag, value, "--db", str(db))
            assert_clean(result)
            assert result.exit_code == 2, (flag, value, result.output)
    assert not db.exists()  # nothing was stored, not even an empty run


@pytest.mark.parametrize("command", ["bench", "p2p", "train", "check", "moe", "kv"])
def test_more_ranks_than_cores_is_refused_without_spawning(command: str, tmp_path: Path) -> None:
    args = CASES[command][0]
    result = invoke(*args, "--nproc", "1000", "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--nproc 1000 is more than the" in result.output and "--oversubscribe" in result.output
    again = invoke(*args, "--nproc", "1000", "--oversubscribe", "--db", str(tmp_path / "r.db"))
    assert again.exit_code == 2 and "per core" in again.output
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("args", [["bench", "-b", "1T", "-e", "1T"], ["p2p", "--size", "1T"],
                                  [*MOE, "--tokens-per-rank", "10000000", "--hidden", "10000000"]])
def test_sizes_past_host_memory_are_refused_on_cpu_ranks(args: list[str], tmp_path: Path) -> None:
    result = invoke(*args, "--backend", "gloo", "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 2 and "GiB of host memory, but only" in result.output
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("args, why", [
    (["--tokens", "1e40", "--gpus", "8"], "--tokens: 1e40 is more than"),
    (["--tokens", "1e10", "--gpus-range", "8..99999999999999999999"], "--gpus-range"),
    (["--tokens", "1e10", "--gpus-range", "8..200000"], "is more than the 131,072"),
    (["--tokens", "1e10", "--gpus", "99999999"], "--gpus must be"),
    (["--tokens", "1e10", "--min-gpus", "0"], "--min-gpus must be at least 1"),
])
def test_advise_searches_are_bounded(args: list[str], why: str) -> None:
    result = invoke("advise", "train", "-m", "llama2-7b", *args)
    assert_clean(result)
    assert result.exit_code == 2 and why in result.output, result.output


@pytest.mark.parametrize("option, value, why", [
    ("--sweep", "", "--sweep: empty"), ("--sweep", "bucket-mb=1,,25", "an empty value"),
    ("--sweep", "bucket-mb=1,1", "1 given more than once"), ("--sweep", "bucket-mb=1,inf", "--bucket-mb"),
    ("--scaling", "", "--scaling: empty"),
])
def test_sweep_and_scaling_points_are_checked(option: str, value: str, why: str, tmp_path: Path) -> None:
    result = invoke(*TRAIN, option, value, "--db", str(tmp_path / "r.db"))
    assert_clean(result)
    assert result.exit_code == 2 and why in result.output, result.output
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("args, why", [
    (["--topk", "5"], "--topk 5 is larger than --experts 4"),
    (["--experts", "3"], "--experts 3 do not shard evenly over 2 ranks"),
    (["--experts", "6", "--nproc", "4", "--oversubscribe"], "--experts 6 do not shard evenly over 4 ranks"),
    (["--tokens-per-rank", "0"], "--tokens-per-rank must be at least 1"),
    (["--tokens-per-rank", "-5"], "--tokens-per-rank must be at least 1"),
    (["--hidden", "99999999999"], "--hidden must be at least 1 and at most"),
    (["--experts", "1000000", "--topk", "2"], "--experts must be at least 1 and at most"),
    (["--precision", "fp4"], "--precision must be one of fp8, bf16"),
    (["--nproc", "1"], "needs at least 2 ranks"),
    (["--system", "no-such-system"], "no-such-system"),
])
def test_bench_moe_bad_shapes_are_one_line_before_any_rank(args: list[str], why: str, tmp_path: Path) -> None:
    result = invoke(*MOE, "--backend", "gloo", *args, "--db", str(tmp_path / "r.db"))
    assert_clean(result)
    assert result.exit_code == 2 and why in result.output, result.output
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("args, why", [
    (["--experts", "4", "--topk", "5"], "--topk 5 is larger than --experts 4"),
    (["--experts", "4"], "give --experts and --topk together"),
    (["--experts", "0", "--topk", "1"], "--experts must be at least 1"),
    (["--experts", "3", "--topk", "1", "--ep", "2"], "ep: 2 does not divide the 3 experts"),
    (["--experts", "4", "--topk", "1", "--ep", "4", "--nproc", "2"], "ep: 4 must be 1"),
    (["--ep", "2"], "ep: 2 needs a mixture-of-experts model"),
    (["--experts", "4", "--topk", "2", "--ep", "2", "--tp", "2"], "--tp cannot be combined with experts"),
])
def test_bench_train_bad_expert_layouts_are_one_line_before_any_rank(args: list[str], why: str,
                                                                     tmp_path: Path) -> None:
    result = invoke(*TRAIN, *args, "--db", str(tmp_path / "r.db"))
    assert_clean(result)
    assert result.exit_code == 2 and why in result.output, result.output
    assert not (tmp_path / "r.db").exists()
