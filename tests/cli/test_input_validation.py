"""Hostile inputs to model/hardware commands: one line naming the problem, exit 2, never a traceback or a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import Result

from linkscope.hardware.loader import ConfigFileWarning

from tests.cli.helpers import run_cli

SYSTEM = """
gpu: H100
gpus: {gpus}
scale_up: {{kind: {kind}, generation: {gen}}}
scale_out: {{fabric: infiniband, nics: 8, nic_gbit_per_s: {nic}}}
source: test
as_of: 2026-11-01
"""


def _system(tmp_path: Path, name: str = "rack.yaml", gpus: str = "8", kind: str = "nvswitch",
            gen: str = "nvlink4", nic: str = "400") -> Path:
    path = tmp_path / name
    path.write_text(SYSTEM.format(gpus=gpus, kind=kind, gen=gen, nic=nic), encoding="utf-8")
    return path


def _user_error(result: Result, needle: str) -> None:
    out = result.output
    assert result.exit_code == 2, out
    assert "Traceback" not in out
    assert needle in out


def _binary(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(b"\xff\xfe\x00\x81binary\x9c")
    return path


def test_binary_catalog_is_one_line(tmp_path: Path) -> None:
    _user_error(run_cli("catalog", "--catalog", str(_binary(tmp_path, "x.yaml"))), "UTF-8")


def test_binary_system_file_is_one_line(tmp_path: Path) -> None:
    path = _binary(tmp_path, "x.yaml")
    _user_error(run_cli("predict", "collective", "--system", str(path)), "UTF-8")


def test_binary_model_file_is_one_line(tmp_path: Path) -> None:
    path = _binary(tmp_path, "m.yaml")
    _user_error(run_cli("predict", "train", "-s", "dgx-h100", "-m", str(path), "--global-batch", "8"), "UTF-8")


def test_binary_file_in_config_dir_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _binary(tmp_path, "junk.yaml")
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    # A broken config file must not break every command: it is skipped with a warning naming it.
    with pytest.warns(ConfigFileWarning, match=r"junk.yaml: not a text file .*delete it: rm"):
        assert run_cli("catalog").exit_code == 0


OVERRIDE = ("price_overrides:\n  - offering: {offering}\n    price_per_hour: 30.0\n"
            "    price_as_of: 2026-11-01\n    price_source: a test page\n")


def test_a_price_override_for_no_offering_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(OVERRIDE.format(offering="lambda/gpu_8x_h100_sxm"))
    _user_error(run_cli("catalog", "--catalog", str(path)), "no offering 'lambda/gpu_8x_h100_sxm'; did you mean")


def test_a_stale_price_override_in_the_config_dir_is_named_and_skipped(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "prices.yaml").write_text(OVERRIDE.format(offering="nowhere/renamed-node"))
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    with pytest.warns(ConfigFileWarning, match=r"prices.yaml: price_overrides: no offering 'nowhere/renamed-node'"):
        assert run_cli("catalog").exit_code == 0


def test_invalid_date_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SYSTEM.format(gpus=8, kind="nvswitch", gen="nvlink4", nic=400).replace("2026-11-01", "2026-13-45"))
    _user_error(run_cli("predict", "collective", "--system", str(path)), "bad.yaml")


@pytest.mark.parametrize("suffix, text", [(".json", "[" * 5000 + "]" * 5000), (".yaml", "[" * 5000 + "]" * 5000)])
def test_deep_nesting_in_model_file_is_one_line(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text(text, encoding="utf-8")
    result = run_cli("predict", "train", "-s", "dgx-h100", "-m", str(path), "--global-batch", "8")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args, needle", [
    (["--nodes", "0"], "--nodes"),
    (["--gpus", "0"], "--gpus"),
    (["--seq-len", "-5"], "--seq-len"),
    (["--seq-len", "0"], "--seq-len"),
])
def test_train_rejects_out_of_range(args: list[str], needle: str) -> None:
    result = run_cli("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--global-batch", "64", *args)
    _user_error(result, needle)


@pytest.mark.parametrize("batch", ["0", "1000000000000000000"])
def test_train_global_batch_bounds(batch: str) -> None:
    _user_error(run_cli("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--global-batch", batch),
                "--global-batch")


def test_huge_layer_count_is_rejected_fast(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("layers: 1000000000000\nhidden: 4096\nheads: 32\nvocab: 32000\nseq_len: 4096\n")
    _user_error(run_cli("predict", "train", "-s", "dgx-h100", "-m", str(path), "--global-batch", "8"), "layers")


@pytest.mark.parametrize("budget", ["-5", "0", "nan"])
def test_infer_latency_budget_must_be_positive(budget: str) -> None:
    result = run_cli("predict", "infer", "-s", "dgx-h100", "-m", "llama2-7b", "--input-tokens", "128",
                     "--output-tokens", "128", "--latency-budget", budget)
    _user_error(result, "--latency-budget")


def test_collective_huge_bytes_rejected() -> None:
    _user_error(run_cli("predict", "collective", "-s", "dgx-h100", "--bytes", "99999999999999999999999"), "--bytes")


@pytest.mark.parametrize("field, kwargs", [
    ("gpus", {"gpus": "1e23"}), ("gpus", {"gpus": "true"}), ("nic_gbit_per_s", {"nic": ".inf"}),
    ("scale_up.generation", {"kind": "nvlink-mesh", "gen": "pcie4"}),
])
def test_nonsense_system_values_rejected(tmp_path: Path, field: str, kwargs: dict[str, str]) -> None:
    _user_error(run_cli("predict", "collective", "-s", str(_system(tmp_path, **kwargs))), field)


def test_system_file_name_with_space_gets_an_id(tmp_path: Path) -> None:
    result = run_cli("predict", "collective", "-s", str(_system(tmp_path, name="my rack.yaml")), "--json")
    assert result.exit_code == 0, result.output


def test_calibrate_rejects_huge_run_id(tmp_path: Path) -> None:
    _user_error(run_cli("calibrate", "x" * 60_000, "--db", str(tmp_path / "r.db")), "RUN_ID")


def test_plan_hostfile_in_missing_directory(tmp_path: Path) -> None:
    result = run_cli("plan", "--system", "dgx-h100", "--nodes", "2", "--tp", "8", "--pp", "1", "--dp", "2",
                     "--write-hostfile", str(tmp_path / "no" / "dir" / "hf"))
    _user_error(result, "--write-hostfile")


@pytest.mark.parametrize("args, needle", [
    (["--gpus", "0"], "--gpus"), (["--global-batch", "0"], "--global-batch"), (["--seq-len", "0"], "--seq-len"),
])
def test_advise_train_zero_is_out_of_range(args: list[str], needle: str) -> None:
    _user_error(run_cli("advise", "train", "--model", "llama2-7b", "--tokens", "1B", *args), needle)


@pytest.mark.parametrize("args, needle", [
    (["--latency-budget", "0"], "--latency-budget"), (["--latency-budget", "-5"], "--latency-budget"),
    (["--latency-budget", "20", "--qps", "nan"], "--qps"),
])
def test_advise_infer_rejects_nonsense(args: list[str], needle: str) -> None:
    _user_error(run_cli("advise", "infer", "--model", "llama2-7b", *args), needle)


def test_catalog_rejects_nan_filter() -> None:
    _user_error(run_cli("catalog", "--max-price-per-gpu-hour", "nan"), "--max-price-per-gpu-hour")


def test_infer_huge_batch_is_rejected() -> None:
    result = run_cli("predict", "infer", "-s", "dgx-h100", "-m", "llama2-7b", "--input-tokens", "128",
                     "--output-tokens", "128", "--batch", str(10**20))
    _user_error(result, "--batch")


def test_seq_len_has_one_range_in_every_command() -> None:
    """`--seq-len 0` fails with the same message in predict, advise and plan: one meaning per option."""
    runs = [run_cli("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--global-batch", "64", "--seq-len", "0"),
            run_cli("advise", "train", "--model", "llama2-7b", "--tokens", "1B", "--seq-len", "0"),
            run_cli("plan", "--system", "dgx-h100", "--nodes", "1", "--tp", "8", "--pp", "1", "--dp", "1",
                    "--seq-len", "0")]
    messages = {r.output.strip() for r in runs}
    assert all(r.exit_code == 2 for r in runs)
    assert len(messages) == 1 and "--seq-len must be between 1 and" in messages.pop()


def test_training_predictions_print_the_batch_and_sequence_length_assumed() -> None:
    train = run_cli("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--global-batch", "64",
                    "--seq-len", "2048")
    assert train.exit_code == 0, train.output
    assert "global batch 64 x seq len 2048" in " ".join(train.output.split())
    scaling = run_cli("predict", "scaling", "-s", "dgx-h100", "-m", "llama2-7b", "--global-batch", "64",
                      "--nodes", "2")
    assert scaling.exit_code == 0, scaling.output
    assert "global batch 64 x seq len" in " ".join(scaling.output.split())
