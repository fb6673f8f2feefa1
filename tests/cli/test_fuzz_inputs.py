"""Inputs that used to hang or crash: FIFOs and devices given as files, numbers past what the store holds, ids of
tens of thousands of characters, output paths that cannot be created. Each is one line and exit 2."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.cli.test_fuzz import FIXTURES, assert_clean, invoke

OCI = FIXTURES / "nccl_tests" / "v2.13_all_reduce_a100_8gpu_oci.txt"


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("args", [["import", "nccl-tests"], ["nccl-log"]])
def test_a_fifo_or_device_is_refused_before_it_is_opened(tmp_path: Path, args: list[str]) -> None:
    # Opening a FIFO with no writer blocks forever: the refusal must come from looking at it, not reading it.
    for target in (_fifo(tmp_path), Path("/dev/zero")):
        if not target.exists():
            continue
        extra = ["--db", str(tmp_path / "r.db")] if args[0] == "import" else []
        result = invoke(*args, str(target), *extra)
        assert_clean(result)
        assert result.exit_code == 2 and "not a regular file" in result.output, result.output
        target.unlink() if target.name == "fifo" else None


def test_a_wrong_count_past_the_stores_integers_is_refused(tmp_path: Path) -> None:
    text = OCI.read_text()
    first = re.search(r"^( +64 +16 +float +sum +-1 +\S+ +\S+ +\S+ +)0 ", text, re.M)
    assert first is not None
    bad = tmp_path / "wrong.txt"
    bad.write_text(text[:first.start()] + first.group(1) + "100000000000000000000000 " + text[first.end():])
    result = invoke("import", "nccl-tests", str(bad), "--db", str(tmp_path / "r.db"))
    assert_clean(result)
    assert result.exit_code == 2 and "#wrong" in result.output and "out of range" in result.output


@pytest.mark.parametrize("command", [["compare", "{id}", "abc"], ["runs", "show", "{id}"],
                                     ["export", "{id}", "--csv"]])
def test_an_id_of_sixty_thousand_characters_is_one_line(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "r.db"
    assert invoke("import", "nccl-tests", str(OCI), "--db", str(db)).exit_code == 0
    result = invoke(*[c.replace("{id}", "a" * 60_000) for c in command], "--db", str(db))
    assert_clean(result)
    assert result.exit_code == 2 and "60,000 characters" in result.output


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("args", [["bench", "-b", "8", "-e", "8", "-J", "/proc/out.json"],
                                  ["check", "--junit", "/proc/j.xml"]])
def test_an_output_path_that_cannot_be_created_is_refused_before_measuring(tmp_path: Path, args: list[str]) -> None:
    result = invoke(*args, "--db", str(tmp_path / "r.db"))
    assert_clean(result)
    assert result.exit_code == 2 and "cannot be written" in result.output
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("command", [["compare", "a", "b"], ["runs"], ["runs", "show", "a"], ["report", "a"],
                                     ["export", "a", "--csv"]])
def test_reading_commands_never_create_or_write_a_database(tmp_path: Path, command: list[str]) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    result = invoke(*command, "--db", str(empty))
    assert result.exit_code == 2 and "an empty file, not a results database" in result.output
    assert empty.stat().st_size == 0 and {p.name for p in tmp_path.iterdir()} == {"empty.db"}
    missing = invoke(*command, "--db", str(tmp_path / "missing.db"))
    assert missing.exit_code == 2 and "no results database there" in missing.output
    assert not (tmp_path / "missing.db").exists()


def _train_run(db: Path) -> str:
    from linkscope.results.records import RunInfo
    from linkscope.results.store import ResultStore

    with ResultStore(db) as store:
        run_id = store.create_run(RunInfo(kind="train", label="", world_size=2, backend="gloo", versions={},
                                          nccl_env={}, system=None, config={}, command=""))
        store.finish_run(run_id, "complete", None)
    return run_id


def test_nothing_to_show_always_says_why(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert invoke("import", "nccl-tests", str(OCI), "--db", str(db)).exit_code == 0
    sweep = json.loads(invoke("runs", "--db", str(db), "--json").stdout)[0]["run_id"]
    train = _train_run(db)
    cases = [(["compare", sweep, train], f"run {train} is a training run, not a collective sweep"),
             (["compare", sweep, sweep, "--op", "broadcast"], f"run {sweep} has no broadcast measurements (it has: "
                                                              "all_reduce)"),
             (["report", train, "-o", str(tmp_path / "r.html")], f"run {train} is a training run"),
             (["runs", "--kind", "banana"], "--kind: 'banana' is not one of bench, p2p, import, check, train")]
    for args, why in cases:
        result = invoke(*args, "--db", str(db))
        assert_clean(result)
        assert result.exit_code == 2 and why in result.output, (args, result.output)
    assert not (tmp_path / "r.html").exists()
    none = invoke("runs", "--kind", "p2p", "--db", str(db))
    assert none.exit_code == 0 and "No stored run has kind 'p2p'" in none.output
    listed = invoke("runs", "--db", str(db), "--kind", "train")
    assert train in listed.output and " 0 " not in listed.output.split(train)[1].splitlines()[0]


SYSTEM = "gpu: H100\ngpus: 8\nscale_up: {kind: nvswitch}\nsource: test\nas_of: 2026-11-01\n"


@pytest.mark.parametrize("text, why", [
    (SYSTEM.replace("2026-11-01", "2999-01-01"), "2999-01-01 is in the future"),
    (SYSTEM.replace("gpus: 8\n", "gpus: 8\ngpus: 4\n"), "key 'gpus' given twice"),
])
def test_future_dates_and_repeated_keys_in_data_files_are_refused(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "sys.yaml"
    path.write_text(text)
    result = invoke("predict", "collective", "--system", str(path))
    assert_clean(result)
    assert result.exit_code == 2 and why in result.output and str(path) in result.output, result.output


PLAN = ["plan", "-s", "dgx-a100", "--nodes", "2", "-m", "llama2-13b"]
ADVISE = ["advise", "train", "-m", "llama2-13b", "--tokens", "1e9"]
TINY = ["bench", "train", "-m", "llama2-7b", "--layers", "1", "--hidden", "64", "--heads", "2", "--vocab", "128",
        "--seq-len", "16", "--nproc", "2", "--profile-steps", "0", "--backend", "gloo"]


@pytest.mark.parametrize("args, says", [
    # The list: a compression the framework cannot run, a PowerSGD rank out of range, a bucket of 0 or above
    # the model, on every command that takes the knobs (predict train's are in test_knob_options.py) ...
    ([*PLAN, "--grad-compression", "powersgd:4", "--framework", "fsdp"], "powersgd:4 does not run under fsdp"),
    ([*PLAN, "--grad-compression", "onebit", "--zero", "3"], "onebit does not run with ZeRO stage 3"),
    ([*PLAN, "--bucket-mb", "0"], "--bucket-mb: must be above 0"),
    ([*ADVISE, "--grad-compression", "powersgd:0"], "PowerSGD rank must be at least 1"),
    ([*ADVISE, "--grad-compression", "powersgd:-1"], "PowerSGD rank must be at least 1 (got -1)"),
    ([*ADVISE, "--bucket-mb", "1000000"], "is above the 49653 MB of gradients of llama2-13b"),
    # ... and on bench train, refused before any rank starts.
    ([*TINY, "--fsdp", "--comm-hook", "powersgd:2"], "cannot be combined with --fsdp/--zero"),
    ([*TINY, "--comm-hook", "powersgd:0"], "--comm-hook: PowerSGD rank must be at least 1"),
    ([*TINY, "--comm-hook", "powersgd:65", "--bucket-mb", "100"], "above the smallest matrix dimension 64"),
    ([*TINY, "--bucket-mb", "0"], "--bucket-mb must be more than 0"),
    ([*TINY, "--comm-hook", "onebit"], "'onebit' is not one of fp16, bf16, powersgd:RANK"),
    # A hook the backend cannot run names what is missing, on --comm-hook and on a sweep's point alike.
    ([*TINY, "--comm-hook", "bf16"], "bf16_compress_hook runs on the nccl backend only"),
    ([*TINY, "--comm-hook", "powersgd:2", "--bucket-mb", "0.01"], "gloo cannot order PowerSGD's per-bucket"),
    ([*TINY, "--bucket-mb", "0.01", "--sweep", "grad-compression=none,powersgd:2"],
     "gloo cannot order PowerSGD's per-bucket"),
    ([*TINY, "--sweep", "grad-compression=none,bf16"], "bf16 needs the nccl backend"),
])
def test_a_knob_the_job_cannot_run_is_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    result = invoke(*args, *(["--db", str(tmp_path / "r.db")] if args[0] == "bench" else []))
    assert_clean(result)
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "r.db").exists()  # refused before a run was stored


def test_a_build_without_the_hook_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import types

    real = importlib.import_module

    def without_hooks(name: str, package: str | None = None) -> types.ModuleType:
        if name.endswith("ddp_comm_hooks.default_hooks"):
            raise ImportError(f"No module named '{name}'")
        if name.endswith("ddp_comm_hooks.powerSGD_hook"):
            return types.ModuleType(name)  # the module is there, the hook is not
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", without_hooks)
    for hook, says in (("fp16", "this PyTorch build has no torch.distributed.algorithms.ddp_comm_hooks.default_hooks"),
                       ("powersgd:2", "this PyTorch build has no powerSGD_hook.powerSGD_hook")):
        result = invoke(*TINY, "--comm-hook", hook, "--bucket-mb", "100", "--db", str(tmp_path / "r.db"))
        assert_clean(result)
        assert result.exit_code == 2 and f"--comm-hook {hook}: {says}" in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "r.db").exists()


def test_bf16_on_an_nccl_older_than_2_10_names_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from linkscope.bench.train.config import missing_hook

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 9, 9))
    assert missing_hook("bf16", "nccl") == "bf16_compress_hook needs NCCL 2.10 or later; this build has NCCL 2.9.9"
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 18, 1))
    assert missing_hook("bf16", "nccl") is None
