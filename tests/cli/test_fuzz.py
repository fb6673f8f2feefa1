"""Fuzz every file linkscope reads and every numeric option of the model commands, in-process.

Whatever the input, a command must end with exit code 0-3, never a traceback, and a successful model command's
JSON must hold only finite, non-negative numbers. Deterministic (derandomized, no example database) and small
enough to run in well under a minute on two cores.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from linkscope.cli.main import app
from tests.cli.helpers import forget_packaged_data

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # large byte reprs
FIXTURES = Path(__file__).parent.parent / "fixtures"
FUZZ = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FEW = settings(FUZZ, max_examples=10)
"""For options whose every example prices offerings (advise): the nasty values are drawn first anyway."""

NASTY_NUMBERS = ["0", "-1", "-5", "1e23", "1000000000000000000", "99999999999999999999999", "nan", "inf", "-inf",
                 ".inf", ".nan", "1.5", "true", "null", "[]", "{}", "''", "auto"]

GOOD_SYSTEM = """gpu: H100
gpus: 8
scale_up: {kind: nvswitch}
scale_out: {fabric: infiniband, nics: 8, nic_gbit_per_s: 400, gpudirect_rdma: true}
source: test
as_of: 2026-11-01
"""
GOOD_MODEL = "layers: 32\nhidden: 4096\nheads: 32\nvocab: 32000\nseq_len: 4096\ndropout: false\n"


def invoke(*args: str) -> Result:
    """Run the CLI in-process, catching whatever escapes so that the assertions can name it."""
    return CliRunner().invoke(app, list(args))


def assert_clean(result: Result) -> None:
    assert result.exit_code in (0, 1, 2, 3), (result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output, result.output[-2000:]
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


def _numbers(data: Any) -> list[float]:
    if isinstance(data, bool):
        return []
    if isinstance(data, (int, float)):
        return [float(data)]
    if isinstance(data, dict):
        return [n for v in data.values() for n in _numbers(v)]
    if isinstance(data, list):
        return [n for v in data for n in _numbers(v)]
    return []


def assert_sane_json(result: Result) -> None:
    """A successful model command's JSON: every number finite and non-negative."""
    assert_clean(result)
    if result.exit_code != 0:
        return
    data = json.loads(result.stdout, parse_constant=lambda c: float(c))
    bad = [n for n in _numbers(data) if not math.isfinite(n) or n < 0]
    assert not bad, (bad[:5], result.stdout[:1000])


def _fixture_texts() -> list[bytes]:
    paths = sorted(FIXTURES.rglob("*"))
    return [p.read_bytes() for p in paths if p.is_file() and p.suffix in (".txt", ".log", ".json")]


def _yaml_texts() -> list[bytes]:
    data = Path(__file__).parent.parent.parent / "linkscope" / "hardware" / "data"
    return [GOOD_SYSTEM.encode(), GOOD_MODEL.encode(), (data / "presets.yaml").read_bytes()[:4000]]


def _mutated(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    """Random bytes, truncations of real files, deep nesting, and real files with numbers swapped for nasty ones."""
    truncated = st.tuples(st.sampled_from(seeds), st.floats(0, 1)).map(lambda t: t[0][: int(len(t[0]) * t[1])])
    deep = st.integers(100, 5000).flatmap(
        lambda n: st.sampled_from([b"[" * n + b"]" * n, b"{a: " * n + b"1" + b"}" * n, b"- " * n + b"1"]))
    swapped = st.tuples(st.sampled_from(seeds), st.sampled_from(NASTY_NUMBERS)).map(
        lambda t: t[0].replace(b"8", t[1].encode(), 3).replace(b"400", t[1].encode()))
    return st.one_of(st.binary(max_size=300), truncated, deep, swapped)


def _write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


@FUZZ
@given(content=_mutated(_yaml_texts()))
def test_fuzz_catalog_file(tmp_path: Path, content: bytes) -> None:
    assert_clean(invoke("catalog", "--catalog", str(_write(tmp_path, "extra.yaml", content))))


@FUZZ
@given(content=_mutated(_yaml_texts()))
def test_fuzz_config_dir_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir(exist_ok=True)
    _write(cfg, "user.yaml", content)
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(cfg))
    assert_clean(invoke("systems"))


def _skypilot_csvs() -> list[bytes]:
    return [p.read_bytes()[:4000] for p in sorted((FIXTURES / "catalog" / "skypilot").rglob("vms.csv"))]


@FUZZ
@given(content=_mutated(_skypilot_csvs()))
def test_fuzz_refresh_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes) -> None:
    cfg = tmp_path / "cfg"
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(cfg))
    source = _write(tmp_path, "vms.csv", content)
    result = invoke("catalog", "refresh", "--from", str(source), "--cloud", "lambda", "--as-of", "2026-12-01",
                    "--apply")
    assert_clean(result)
    # Whatever was written, every command still reads it.
    assert invoke("catalog", "--json").exit_code == 0


@FUZZ
@given(content=_mutated(_yaml_texts()))
def test_fuzz_system_file(tmp_path: Path, content: bytes) -> None:
    path = _write(tmp_path, "my rack.yaml", content)
    assert_sane_json(invoke("predict", "collective", "-s", str(path), "--json"))


@FUZZ
@given(content=_mutated(_yaml_texts()), suffix=st.sampled_from([".yaml", ".json"]))
def test_fuzz_model_file(tmp_path: Path, content: bytes, suffix: str) -> None:
    path = _write(tmp_path, f"model{suffix}", content)
    assert_sane_json(invoke("predict", "train", "-s", "dgx-h100", "-m", str(path), "--global-batch", "64",
                            "--json"))


@FUZZ
@given(content=_mutated(_fixture_texts()))
def test_fuzz_nccl_tests_import(tmp_path: Path, content: bytes) -> None:
    path = _write(tmp_path, "out.txt", content)
    assert_clean(invoke("import", "nccl-tests", str(path), "--db", str(tmp_path / "runs.db")))


@FUZZ
@given(content=_mutated(_fixture_texts()))
def test_fuzz_nccl_log(tmp_path: Path, content: bytes) -> None:
    assert_clean(invoke("nccl-log", str(_write(tmp_path, "nccl.log", content))))


NUMBER = st.one_of(st.sampled_from(NASTY_NUMBERS), st.integers(-10, 10**20).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))

TRAIN = ["predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--json"]
ADVISE_TRAIN = ["advise", "train", "--model", "llama2-7b", "--tokens", "1B", "--provider", "lambda", "--gpus", "8",
                "--json"]
INFER = ["predict", "infer", "-s", "dgx-h100", "-m", "llama2-7b", "--json"]
COMMANDS: dict[str, tuple[list[str], list[str], Callable[[Result], None]]] = {
    "collective": (["predict", "collective", "-s", "dgx-h100", "--json"], ["--bytes", "--gpus"], assert_sane_json),
    "train": (TRAIN, ["--global-batch", "--seq-len", "--gpus", "--nodes", "--tp", "--pp", "--zero"], assert_sane_json),
    "train-triton": ([*TRAIN, "--attention", "triton"], ["--global-batch", "--seq-len", "--gpus", "--tp"],
                     assert_sane_json),
    "train-lora": ([*TRAIN, "--peft", "lora"], ["--lora-rank", "--global-batch", "--zero", "--tp", "--pp"],
                   assert_sane_json),
    "scaling-lora": (["predict", "scaling", "-s", "dgx-h100", "-m", "llama2-7b", "--peft", "lora", "--json"],
                     ["--lora-rank", "--nodes", "--global-batch"], assert_sane_json),
    "advise-train-lora": ([*ADVISE_TRAIN, "--peft", "lora"], ["--lora-rank", "--global-batch"], assert_sane_json),
    "plan-lora": (["plan", "-s", "dgx-h100", "-m", "llama2-7b", "--peft", "lora", "--json"],
                  ["--nodes", "--lora-rank", "--zero", "--tp"], assert_clean),
    "infer": (INFER, ["--input-tokens", "--output-tokens", "--batch", "--latency-budget", "--tp", "--pp"],
              assert_sane_json),
    "infer-decode-only": ([*INFER, "--no-prefill-interference"], ["--input-tokens", "--output-tokens", "--batch",
                                                                   "--latency-budget"], assert_sane_json),
    "infer-serial": ([*INFER, "--engine", "serial"], ["--input-tokens", "--output-tokens", "--batch",
                                                      "--latency-budget", "--tp"], assert_sane_json),
    "advise-infer": (["advise", "infer", "--model", "llama2-7b", "--json"],
                     ["--latency-budget", "--input-tokens", "--qps", "--max-price-per-gpu-hour", "--tp"], assert_clean),
    "advise-train": (ADVISE_TRAIN, ["--budget", "--top", "--price-per-gpu-hour", "--ep", "--etp"], assert_sane_json),
    "advise-compare": (["advise", "infer", "--model", "llama2-7b", "--latency-budget", "20", "--provider", "lambda",
                        "--compare-interconnect", "--json"], ["--price-per-gpu-hour", "--tp"], assert_clean),
    "plan": (["plan", "--system", "dgx-h100", "--tp", "8", "--pp", "1", "--dp", "1"], ["--nodes", "--seq-len"],
             assert_clean),
    "plan-auto": (["plan", "-s", "dgx-h100", "-m", "llama2-7b", "--json"],
                  ["--nodes", "--tp", "--pp", "--dp", "--zero", "--micro-batch", "--global-batch", "--ep", "--etp",
                   "--interleave"], assert_clean),
    "plan-moe": (["plan", "-s", "dgx-h100", "-m", "mixtral-8x7b", "--nodes", "2", "--global-batch", "64", "--json"],
                 ["--interleave", "--moe-imbalance", "--ep", "--etp"], assert_clean),
    "moe": (["predict", "moe", "-s", "dgx-h100", "--ep", "16", "--tokens-per-rank", "4096", "--hidden", "7168",
             "--topk", "8", "--experts", "256", "--json"],
            ["--ep", "--tokens-per-rank", "--hidden", "--topk", "--experts", "--max-nodes-per-token", "--imbalance"],
            assert_sane_json),
    "train-moe": (["predict", "train", "-s", "dgx-h100", "-m", "mixtral-8x7b", "--nodes", "2", "--tp", "1", "--pp",
                   "1", "--moe-a2a-overlap", "--json"], ["--ep", "--etp", "--moe-imbalance", "--global-batch"],
                  assert_sane_json),
    "infer-moe": (["predict", "infer", "-s", "hgx-h200", "-m", "deepseek-v3", "--precision", "fp8", "--tp", "1",
                   "--ep", "8", "--json"], ["--ep", "--batch", "--tp"], assert_sane_json),
    "catalog": (["catalog", "--json"], ["--min-gpus", "--min-scale-out-gbit", "--max-price-per-gpu-hour"],
                assert_clean),
}
DEFAULTS = {"--global-batch": "64", "--input-tokens": "128", "--output-tokens": "128", "--nodes": "1"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
@FUZZ
@given(data=st.data())
def test_fuzz_numeric_options(name: str, data: st.DataObject) -> None:
    base, options, check = COMMANDS[name]
    flag = data.draw(st.sampled_from(options), label="flag")
    value = data.draw(NUMBER, label="value")
    extra = [x for f, v in DEFAULTS.items() if f != flag and f in options for x in (f, v)]
    check(invoke(*base, *extra, f"{flag}={value}"))


FRAMEWORK_COMMANDS = {"train": [*TRAIN, "--global-batch", "64"],
                      "plan-auto": [*COMMANDS["plan-auto"][0], "--nodes", "1"], "advise-train": ADVISE_TRAIN}


@pytest.mark.parametrize("name", sorted(FRAMEWORK_COMMANDS))
@FEW
@given(framework=st.one_of(st.sampled_from(["auto", "megatron", "fsdp", "deepspeed", "Megatron", "", "zero3",
                                            "fsdp ", "none"]), st.text(max_size=12)),
       zero=st.sampled_from([None, "0", "1", "2", "3"]))
def test_fuzz_framework(name: str, framework: str, zero: str | None) -> None:
    # A known framework answers (or, with a ZeRO stage it lacks, exits 2 in one line); anything else exits 2.
    args = [*FRAMEWORK_COMMANDS[name], f"--framework={framework}"]
    if zero is not None and name != "advise-train":
        args.append(f"--zero={zero}")
    result = invoke(*args)
    assert_clean(result)
    if result.exit_code == 0:
        assert framework in ("auto", "megatron", "fsdp", "deepspeed")
        if name != "plan-auto":
            assert_sane_json(result)
    else:
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


ENGINE_COMMANDS = {"infer": [*INFER, "--latency-budget", "30"],
                   "advise-infer": [*COMMANDS["advise-infer"][0], "--latency-budget", "20", "--provider", "lambda"]}


@pytest.mark.parametrize("name", sorted(ENGINE_COMMANDS))
@FEW
@given(engine=st.one_of(st.sampled_from(["overlapped", "serial", "Serial", "", "vllm", "serial ", "fused",
                                         "overlapped\n"]), st.text(max_size=12)))
def test_fuzz_engine(name: str, engine: str) -> None:
    # A known engine answers with sane JSON that names it; anything else is one line naming --engine, exit 2.
    result = invoke(*ENGINE_COMMANDS[name], f"--engine={engine}")
    assert_clean(result)
    if result.exit_code == 0:
        assert engine in ("overlapped", "serial")
        doc = json.loads(result.stdout)
        assert (doc["engine"] if name == "infer" else doc["request"]["engine"]) == engine
    else:
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert "--engine" in result.output


DEADLINES = st.one_of(
    st.sampled_from(["none", "None", "off", "1000y", "10y", "0d", "-1d", "1e400d", "nand", "infd", "3.5w", "1s", ""]),
    st.tuples(NUMBER, st.sampled_from(["s", "min", "h", "d", "w", "y", "", " d", "x"])).map("".join))


@FEW
@given(deadline=DEADLINES)
def test_fuzz_deadline(deadline: str) -> None:
    # A valid deadline answers (exit 0, sane JSON, nothing ranked past it); anything else is one line, exit 2.
    result = invoke(*ADVISE_TRAIN, f"--deadline={deadline}")
    assert_sane_json(result)
    if result.exit_code == 0:
        doc = json.loads(result.stdout)
        limit = doc["request"]["deadline_s"]
        assert limit is None or all(r["time_to_train_s"] <= limit for r in doc["rows"] if r["feasible"])
    else:
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


@FEW
@given(gpu=st.one_of(st.sampled_from(["A100", "h100", "H200 ", "b200", "MI300X", "A100-SXM4-80GB", "GB200", "", "-",
                                      "a100 pcie", "H100-NVLINK"]), st.text(max_size=12)))
def test_fuzz_gpu_filter(gpu: str) -> None:
    result = invoke("catalog", "--json", "--provider", "lambda", f"--gpu={gpu}")
    assert_clean(result)
    assert result.exit_code in (0, 2)


@FEW
@given(currency=st.one_of(st.sampled_from(["USD", "eur", " CNY ", "GBP", "", "$", "usd\n", "E\u0301UR"]),
                          st.text(max_size=8)),
       command=st.sampled_from(["train", "infer"]))
def test_fuzz_advise_currency(currency: str, command: str) -> None:
    # A known currency answers with its rate in the JSON; anything else is one line, exit 2.
    base = ADVISE_TRAIN if command == "train" else [*COMMANDS["advise-infer"][0], "--latency-budget", "20",
                                                    "--provider", "lambda"]
    result = invoke(*base, f"--currency={currency}")
    assert_clean(result)
    if result.exit_code == 0:
        assert json.loads(result.stdout)["currency"]["code"] == currency.strip().upper()
    else:
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("url", ["postgresql://", "postgres://", "postgresql://:@:/", "postgresql://u:p@127.0.0.1:1/db",
                                 "postgresql://u:secret@127.0.0.1:99999/db", "postgresql://u@[::1/db",
                                 "postgresql://u@127.0.0.1:1/db?sslmode=nonsense", "postgresql://%zz@127.0.0.1/db",
                                 "postgresql://127.0.0.1:1/" + "x" * 5000])
@pytest.mark.parametrize("command", [["runs"], ["runs", "show", "abc"], ["export", "abc", "--csv"],
                                     ["compare", "a", "b"], ["import", "nccl-tests", "/nonexistent"]])
def test_fuzz_db_urls(url: str, command: list[str]) -> None:
    result = invoke(*command, "--db", url)
    assert_clean(result)
    assert result.exit_code == 2 and "secret" not in result.output


PEFT_WORDS = st.one_of(st.sampled_from(["lora", "LoRA", "qlora", "", "attn", "attn-mlp", "all", "none", "bf16", "fp8",
                                        "nf4", "int4", "fp4"]), st.text(max_size=8))


@FUZZ
@given(flag=st.sampled_from(["--peft", "--lora-targets", "--base-precision"]), value=PEFT_WORDS)
def test_fuzz_peft_words(flag: str, value: str) -> None:
    # A word the option does not know is one line and exit 2; a known one answers with sane JSON.
    args = {"--peft": "lora", "--lora-targets": "attn", "--base-precision": "bf16", flag: value}
    result = invoke(*TRAIN, "--global-batch", "64", *[x for f, v in args.items() for x in (f, v)])
    assert_sane_json(result)
    if result.exit_code != 0:
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("value", ["0x", "-1", "nan", "1e9", "99999999999999999999999", "auto", "''", "1.5"])
def test_bench_train_lora_refuses_bad_ranks_before_any_rank_starts(value: str) -> None:
    # Each value is out of range or not an integer: exit 2 before any rank is launched; an integer out of
    # range is one line naming the flag (the rest are the option parser's usage error).
    result = invoke("bench", "train", "-m", "llama2-7b", "--layers", "1", "--hidden", "64", "--heads", "2",
                    "--nproc", "1", "--backend", "gloo", f"--lora={value}")
    assert_clean(result)
    assert result.exit_code == 2, result.output
    if value.lstrip("-").isdigit():
        assert len(result.output.strip().splitlines()) == 1 and "--lora" in result.output, result.output


def _predict_train_from_cache() -> Result:
    """`predict train` with every packaged loader reading the cache again, as a fresh process would."""
    forget_packaged_data()
    try:
        return invoke(*TRAIN)
    finally:
        forget_packaged_data()


@FUZZ
@given(mutation=st.one_of(st.binary(max_size=300), st.floats(0, 1).map(lambda f: ("truncate", f)),
                          st.tuples(st.floats(0, 1), st.integers(0, 255)).map(lambda t: ("flip", *t))))
def test_fuzz_built_cache_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutation: Any) -> None:
    monkeypatch.setenv("LINKSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    expected = _predict_train_from_cache()  # fills the cache
    assert expected.exit_code == 0
    for entry in (tmp_path / "cache" / "built").glob("*.pickle"):
        data = entry.read_bytes()
        if isinstance(mutation, bytes):
            data = mutation
        elif mutation[0] == "truncate":
            data = data[: int(len(data) * mutation[1])]
        else:
            at = int((len(data) - 1) * mutation[1])
            data = data[:at] + bytes([mutation[2]]) + data[at + 1:]
        entry.write_bytes(data)
    result = _predict_train_from_cache()  # a damaged entry is validated again: the same answer
    assert_clean(result)
    assert result.exit_code == 0 and result.stdout == expected.stdout


# Hardening III: secrets, devices as targets, printable output, bad profiles, bounded inputs, unused options,
# contradictions. Each class a few deterministic examples.

SECRET = "fuzzSecret42"


@pytest.mark.parametrize("url", [f"postgresql://u:{SECRET}@127.0.0.1:1/db", f"postgres://u:{SECRET}@[::1/db",
                                 f"postgresql://u:{SECRET}@127.0.0.1:1/db?password={SECRET}",
                                 f"postgresql://127.0.0.1:1/db?password={SECRET}"])
@pytest.mark.parametrize("command", [["runs"], ["bench", "-e", "1K"], ["check", "--quick"]])
def test_fuzz_a_password_in_a_url_is_never_printed(url: str, command: list[str]) -> None:
    result = invoke(*command, "--db", url)
    assert_clean(result)
    assert SECRET not in result.output


@given(command=st.sampled_from([["report", "r", "-o"], ["export", "r", "--csv", "-o"], ["export", "r", "--prometheus"],
                                ["catalog", "--html"], ["check", "--quick", "--junit"], ["bench", "-e", "1K", "-J"]]),
       kind=st.sampled_from(["fifo", "dir", "socket"]))
@FEW
def test_fuzz_non_regular_output_targets_are_refused(tmp_path: Path, command: list[str], kind: str) -> None:
    import socket

    target = tmp_path / f"t-{kind}"
    if not target.exists():
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "dir":
            target.mkdir()
        else:
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(str(target))
            sock.close()
    db = [] if command[0] == "catalog" else ["--db", str(tmp_path / "r.db")]
    result = invoke(*command, str(target), *db)
    assert_clean(result)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output


CONTROL = st.text(alphabet=st.sampled_from(["\x1b", "\x07", "\x9b", "\u202e", "[", "]", "0", ";", "a", "\x00",
                                            "\x08", "\r"]), min_size=1, max_size=12)


@FEW
@given(label=CONTROL)
def test_fuzz_labels_with_control_characters_print_escaped(tmp_path: Path, label: str) -> None:
    db = str(tmp_path / f"r{abs(hash(label))}.db")
    imported = invoke("import", "nccl-tests", str(FIXTURES / "nccl_tests" / "v2.13_all_reduce_a100_8gpu_oci.txt"),
                      "--db", db, "--label", label)
    assert_clean(imported)
    if imported.exit_code != 0:
        return
    for args in (["runs"], ["runs", "--json"]):
        result = invoke(*args, "--db", db)
        assert_clean(result)
        if "--json" in args:
            assert json.loads(result.stdout)[0]["label"] == label  # JSON stays exact
        else:
            assert not any(c in result.stdout for c in "\x1b\x07\x9b\u202e\x00\x08")


PROFILE_VALUES = st.one_of(st.sampled_from(["banana", 1e308, -1, None, [], {}, True, float("nan")]),
                           st.text(max_size=5), st.integers(-10, 10**30))


@FEW
@given(field=st.sampled_from(["train", "system", "kv", "train_compute", "fits", "ranks", "offering", "name"]),
       value=PROFILE_VALUES)
def test_fuzz_a_damaged_profile_never_breaks_offering_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               field: str, value: Any) -> None:
    folder = tmp_path / f"profiles-{abs(hash((field, repr(value))))}"
    folder.mkdir()
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(folder))
    data = {"name": "bad", "run_id": "r", "created_at": "2026-01-01", "ranks": 2, "nodes": 1, "backend": "gloo",
            "fits": {}, "system": None, "offering": "aws/p5.48xlarge", "label": ""}
    data[field] = value
    (folder / "bad.json").write_text(json.dumps(data))
    result = invoke("predict", "collective", "-s", "aws/p5.48xlarge", "--json")
    assert_clean(result)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("source", ["fifo", "/dev/zero", "/dev/null"])
@pytest.mark.parametrize("command", [["catalog", "--catalog"], ["import", "nccl-tests"], ["predict", "train", "-s",
                                                                                        "dgx-h100", "-m"]])
def test_fuzz_endless_and_blocking_inputs_are_refused(tmp_path: Path, source: str, command: list[str]) -> None:
    path = source
    if source == "fifo":
        path = str(tmp_path / "pipe.yaml")
        os.mkfifo(path)
    result = invoke(*command, path, "--db", str(tmp_path / "r.db")) if command[0] == "import" else \
        invoke(*command, path)
    assert_clean(result)
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize("args", [["runs", "--limit"], ["report", "--fleet", "--limit"],
                                  ["bench", "train", "-m", "llama2-7b", "--layers"],
                                  ["bench", "train", "-m", "llama2-7b", "--hidden"],
                                  ["check", "--quick", "--rounds"], ["check", "--quick", "--drop-pct"],
                                  [*TRAIN, "--lora-rank"], [*ADVISE_TRAIN, "--budget"]])
@pytest.mark.parametrize("value", ["99999999999999999999999", "-1", "nan", "1e308"])
def test_fuzz_numbers_reach_neither_sqlite_nor_c_unchecked(tmp_path: Path, args: list[str], value: str) -> None:
    result = invoke(*args, value, "--db", str(tmp_path / "r.db")) if "--json" not in args else invoke(*args, value)
    assert_clean(result)
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize("url", ["mysql://u@h/db", "sqlite:///x.db", "http://h/db", "file://x", "MySQL://x"])
def test_fuzz_unknown_store_schemes_create_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.chdir(tmp_path)
    for env in (False, True):
        if env:
            monkeypatch.setenv("LINKSCOPE_DB", url)
        result = invoke("import", "nccl-tests", str(FIXTURES / "nccl_tests" / "v2.13_all_reduce_a100_8gpu_oci.txt"),
                        *([] if env else ["--db", url]))
        assert_clean(result)
        assert result.exit_code == 2 and "not a store" in result.output
    assert list(tmp_path.iterdir()) == []


@FEW
@given(zero=st.sampled_from(["2", "3"]), pp=st.sampled_from(["2", "4", "8"]))
def test_fuzz_deepspeed_pipelines_run_zero_0_1_only(zero: str, pp: str) -> None:
    result = invoke(*TRAIN, "--global-batch", "64", "--framework", "deepspeed", "--zero", zero, "--pp", pp)
    assert_clean(result)
    assert result.exit_code == 2 and "ZeRO stages 0-1 only" in result.output
