"""`bench moe` end to end on two CPU ranks: the document, the stored run and what the reading commands make of it.
A tiny shape and few iterations; no assertion on how fast anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from linkscope.bench.faults import ENV_VAR
from linkscope.cli.main import app
from linkscope.model.comm.moe import convention_bytes, token_bytes
from linkscope.results.store import ResultStore

SHAPE = ["--tokens-per-rank", "96", "--hidden", "256", "--topk", "3", "--experts", "8", "--skew", "1.0"]


def _cli(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    db = tmp_path_factory.mktemp("moe") / "r.db"
    result = _cli("bench", "moe", *SHAPE, "--precision", "fp8", "-n", "3", "-w", "1", "--backend", "gloo",
                  "--nproc", "2", "--system", "dgx-h100", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    return db, json.loads(result.stdout)


def test_the_document_counts_bytes_in_deepeps_convention(measured: tuple[Path, dict]) -> None:
    _, doc = measured
    assert doc["ranks"] == 2 and doc["nodes"] == 1 and doc["iters"] == 3 and doc["backend"] == "gloo"
    dispatch_copy, combine_copy = token_bytes(256, 3, "fp8")
    assert doc["token_bytes"] == {"dispatch": dispatch_copy, "combine": combine_copy}
    assert 1.0 <= doc["ranks_per_token"] <= 2.0 and doc["nodes_per_token"] == 1.0
    assert doc["dispatch_bytes_per_rank"] == pytest.approx(
        convention_bytes(96, dispatch_copy, doc["ranks_per_token"], 1.0, 1))
    # Every copy sent is received: the rows add up, and a token reaches each rank at most once.
    assert sum(doc["rows_sent"]) == sum(doc["rows_received"]) == round(96 * 2 * doc["ranks_per_token"])
    assert max(doc["rows_sent"]) <= 96 * 2
    for phase in ("dispatch", "combine"):
        assert 0 < doc[f"{phase}_us_min"] <= doc[f"{phase}_us"] <= doc[f"{phase}_us_max"]
        assert doc[f"{phase}_gb_per_s"] == pytest.approx(doc[f"{phase}_bytes_per_rank"] / (1e3 * doc[f"{phase}_us"]))


def test_a_gpu_systems_prediction_beside_cpu_ranks_says_so_and_claims_no_error(measured: tuple[Path, dict]) -> None:
    _, doc = measured
    assert doc["predicted"]["dispatch_us"] > 0 and "dgx-h100" in doc["predicted"]["source"]
    assert doc["error_pct"] is None and "not for this host" in doc["note"]


def test_the_document_says_what_torch_distributed_ran_over(measured: tuple[Path, dict]) -> None:
    from linkscope.traincheck.moe import ran_over

    _, doc = measured
    assert doc["ran_over"].startswith("gloo: TCP sockets")
    assert "over nvlink" in doc["predicted"]["source"]
    assert ran_over("nccl", 1).startswith("nccl inside one node")
    assert "sockets" in ran_over("nccl", 2, {"NCCL_IB_DISABLE": "1"})
    assert "net proxy thread over aws-ofi-nccl" in ran_over("nccl", 2, {"NCCL_NET_PLUGIN": "aws-ofi-nccl"})


def test_the_run_is_stored_and_read_back(measured: tuple[Path, dict]) -> None:
    db, doc = measured
    with ResultStore(str(db)) as store:
        info = store.get_run(doc["run_id"])
    assert info.kind == "moe" and info.status == "complete" and info.world_size == 2
    assert info.extra["moe_summary"]["dispatch_us"] == doc["dispatch_us"]
    assert len(info.extra["moe"]["timings"]["dispatch_s"]) == 3 and info.extra["moe"]["timings"]["wrong_rows"] == [0, 0]
    listed = _cli("runs", "--db", str(db), "--kind", "moe", "--json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [doc["run_id"]]
    shown = _cli("runs", "show", doc["run_id"], "--db", str(db))
    assert shown.exit_code == 0 and "dispatch" in shown.output and "DeepEP's convention" in shown.output
    csv = _cli("export", doc["run_id"], "--csv", "--db", str(db))
    header, dispatch, combine = csv.stdout.strip().splitlines()
    assert header.startswith("phase,") and dispatch.startswith("dispatch,2,1,96,") and combine.startswith("combine,")


@pytest.mark.parametrize("command, why", [
    (["compare"], "is a MoE dispatch/combine run, not a collective sweep"),
    (["calibrate"], "too few sizes to fit latency and bandwidth"),
    (["report"], "is a MoE dispatch/combine run; the report draws collective sweeps"),
])
def test_compare_calibrate_and_report_refuse_with_one_line(measured: tuple[Path, dict], command: list[str],
                                                           why: str, tmp_path: Path) -> None:
    db, doc = measured
    args = [*command, doc["run_id"], doc["run_id"]] if command == ["compare"] else [*command, doc["run_id"]]
    if command == ["report"]:
        args += ["-o", str(tmp_path / "r.html")]
    result = _cli(*args, "--db", str(db))
    assert result.exit_code == 2 and why in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_rank_that_dies_mid_run_ends_it_incomplete_with_the_routing_kept(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, json.dumps({"action": "exit", "rank": 1, "op": "moe", "size": 1}))
    db = tmp_path / "r.db"
    result = _cli("bench", "moe", *SHAPE, "-n", "3", "-w", "1", "--backend", "gloo", "--nproc", "2", "--db", str(db))
    assert result.exit_code == 3 and "rank 1" in result.output and "Traceback" not in result.output
    with ResultStore(str(db)) as store:
        (summary,) = store.list_runs()
        info = store.get_run(summary.run_id)
    assert info.kind == "moe" and info.status == "incomplete"
    assert len(info.extra["moe"]["routing"]["counts"]) == 2 and "moe_summary" not in info.extra
