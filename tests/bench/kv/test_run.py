"""`bench kv` end to end on two CPU ranks: the document, the stored run, calibrating it and predicting with the fit,
and a rank that dies. Tiny pages and few transfers; no assertion on how fast anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from linkscope.bench.faults import ENV_VAR
from linkscope.cli.main import app
from linkscope.results.store import ResultStore

SHAPE = ["--layers", "4", "--kv-heads", "2", "--head-dim", "32", "--tokens", "64", "--block-tokens", "8,32",
         "--in-flight", "1,2", "-n", "3", "-w", "1", "--backend", "gloo", "--nproc", "2"]


def _cli(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    db = tmp_path_factory.mktemp("kv") / "r.db"
    result = _cli("bench", "kv", *SHAPE, "--system", "dgx-h100", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    return db, json.loads(result.stdout)


def test_every_point_has_its_pages_bytes_and_rate(measured: tuple[Path, dict]) -> None:
    _, doc = measured
    assert doc["backend"] == "gloo" and doc["pairs"] == 1 and doc["iters"] == 3
    points = {(p["block_tokens"], p["in_flight"]): p for p in doc["points"]}
    assert set(points) == {(8, 1), (8, 2), (32, 1), (32, 2)}
    token_bytes = 2 * 2 * 32 * 2 * 4  # K and V x heads x dim x bf16 x layers
    for (block, flight), p in points.items():
        assert p["messages_per_pair"] == flight * 64 // block
        assert p["page_bytes"] == block * token_bytes and p["bytes_per_pair"] == flight * 64 * token_bytes
        assert 0 < p["time_us_min"] <= p["time_us"] <= p["time_us_max"]
        assert p["gb_per_s"] == pytest.approx(p["bytes_per_pair"] / (1e3 * p["time_us"]))
        assert p["wrong_pages"] == [0, 0]


def test_a_gpu_systems_figure_beside_cpu_ranks_says_so_and_claims_no_error(measured: tuple[Path, dict]) -> None:
    _, doc = measured
    assert all(p["predicted"]["time_us"] > 0 and p["error_pct"] is None for p in doc["points"])
    assert "dgx-h100" in doc["source"] and "not for this host" in doc["note"]


def test_the_run_is_stored_shown_exported_and_calibrated(measured: tuple[Path, dict], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    db, doc = measured
    with ResultStore(str(db)) as store:
        info = store.get_run(doc["run_id"])
    assert info.kind == "kv" and info.status == "complete" and info.world_size == 2
    assert len(info.extra["kv"]["points"]) == 4 and info.extra["kv_summary"]["points"] == doc["points"]
    shown = _cli("runs", "show", doc["run_id"], "--db", str(db))
    assert shown.exit_code == 0 and "KV pages" in shown.output
    csv = _cli("export", doc["run_id"], "--csv", "--db", str(db))
    assert csv.stdout.splitlines()[0].startswith("block_tokens,in_flight,") and len(csv.stdout.splitlines()) == 5
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path))
    fitted = _cli("calibrate", doc["run_id"], "--name", "kvcpu", "--db", str(db), "--json")
    assert fitted.exit_code == 0, fitted.output
    kv = json.loads(fitted.stdout)["kv"]
    assert kv["gb_per_s"] > 0 and kv["points"] == 4
    again = _cli("bench", "kv", *SHAPE, "--system", "profile:kvcpu", "--db", str(db), "--json")
    assert again.exit_code == 0, again.output
    redo = json.loads(again.stdout)
    assert "profile kvcpu" in redo["source"] and redo["note"] == ""
    assert all(p["predicted"]["time_us"] > 0 and p["error_pct"] is not None for p in redo["points"])


def test_a_profile_without_a_kv_fit_is_refused_before_any_rank_starts(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINKSCOPE_PROFILE_DIR", str(tmp_path))
    result = _cli("bench", "kv", *SHAPE, "--system", "profile:missing", "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 2 and "unknown profile" in result.output


def test_a_rank_that_dies_mid_run_ends_it_incomplete_with_the_points_before_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Transfer 4 is the second point's second (3 timed per point).
    monkeypatch.setenv(ENV_VAR, json.dumps({"action": "exit", "rank": 1, "op": "kv", "size": 4}))
    db = tmp_path / "r.db"
    result = _cli("bench", "kv", *SHAPE, "--db", str(db))
    assert result.exit_code == 3 and "rank 1" in result.output and "Traceback" not in result.output
    with ResultStore(str(db)) as store:
        (summary,) = store.list_runs()
        info = store.get_run(summary.run_id)
    assert info.kind == "kv" and info.status == "incomplete"
    assert [p["block_tokens"] for p in info.extra["kv"]["points"]] == [8]
