"""`advise tune`: knobs ranked by predicted step time, with ranges and the bench command that measures each."""

from __future__ import annotations

import json

from linkscope.advise.tune import TuneAdvice, advise_tune, bench_command, candidate_knobs
from linkscope.cli.options import layout_request, training_job
from linkscope.hardware.loader import load_db
from linkscope.model.calibration.systems import resolve
from linkscope.model.step.knobs import Knobs
from linkscope.model.step.transformer import load_model
from tests.cli.helpers import run_cli

ETHERNET = "gcp/a2-ultragpu-8g"
"""8x A100 80GB per node, one 100 Gb/s TCP link between nodes (data/offerings/gcp.yaml)."""


def _advice(tp: str, pp: str, dp: str, zero: int) -> TuneAdvice:
    job = training_job(load_model("llama2-13b"), 256, None)
    req = layout_request(tp, pp, dp, "1", None, None, "auto", zero)
    resolved = resolve(ETHERNET, load_db([]), 32, None)
    return advise_tune(job, resolved, req, "llama2-13b", ETHERNET)


def test_pinned_data_parallel_layout_ranks_compression_first() -> None:
    advice = _advice("1", "1", "32", 0)
    times = [(not o.fits, o.step_time_s) for o in advice.options]
    assert times == sorted(times)
    assert advice.baseline.speedup == 1.0 and advice.baseline.dp_comm_exposed_s > 1.0
    best = advice.options[0]
    # Across 100 Gb/s Ethernet, low-rank compression removes most of the exposed gradient traffic.
    assert best.label.startswith("powersgd") and best.speedup > 1.2
    assert best.step_time_s_range[0] <= best.step_time_s <= best.step_time_s_range[-1]
    assert best.bench_command and "--comm-hook powersgd:" in best.bench_command
    onebit = next(o for o in advice.options if o.label == "onebit")
    assert onebit.bench_command is None and "DeepSpeed" in onebit.measure_note
    # ZeRO++ needs ZeRO-3, which the pinned layout rules out: skipped with the reason.
    assert any(s["label"].startswith("zero++") and "stage 3" in s["reason"] for s in advice.skipped)
    assert any("convergence" in n for n in advice.notes)


def test_candidates_and_commands() -> None:
    job = training_job(load_model("llama2-13b"), None, None)
    labels = [k.label() for k in candidate_knobs(job)]
    assert {"fp16", "bf16", "powersgd:4", "onebit", "bucket 25 MB", "zero++ qw,qg,hp"} <= set(labels)
    assert bench_command("llama2-13b", Knobs("bf16", bucket_mb=25), ETHERNET, 16, {"tp": 2, "zero": 0}) == \
        (f"linkscope bench train -m llama2-13b -s {ETHERNET} --nproc 16 --tp 2 --comm-hook bf16 --bucket-mb 25", "")
    command, why = bench_command("llama2-13b", Knobs("bf16"), ETHERNET, 16, {"zero": 3, "pp": 1})
    assert command == f"linkscope bench train -m llama2-13b -s {ETHERNET} --nproc 16 --comm-hook bf16"
    assert "plain DDP" in why
    assert bench_command("llama2-13b", Knobs(zeropp=frozenset({"qw"})), ETHERNET, 16)[0] is None


def test_cli_prints_a_ranked_list_and_json() -> None:
    result = run_cli("advise", "tune", "-s", ETHERNET, "-m", "llama2-13b")
    assert result.exit_code == 0, result.output
    assert "knobs ranked by predicted step time" in result.output
    assert "1. linkscope bench train -m llama2-13b" in result.output
    doc = json.loads(run_cli("advise", "tune", "-s", ETHERNET, "-m", "llama2-13b", "--gpus", "32", "--dp", "32",
                             "--tp", "1", "--pp", "1", "--zero", "0", "--global-batch", "256", "--json").output)
    assert doc["options"][0]["speedup"] > 1.0
    assert {"label", "step_time_s", "step_time_s_range", "bench_command", "layout"} <= set(doc["options"][0])
