"""run_bench end to end on local gloo ranks: repeats, the store, and what is refused before starting."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.bench.config import BenchConfig, RunOptions
from linkscope.bench.jobs import Job
from linkscope.bench.runner import check_world, run_bench
from linkscope.hardware.errors import UserError
from linkscope.results.store import ResultStore


def test_repeats_give_mean_and_spread_in_the_store(tmp_path: Path) -> None:
    lines: list[str] = []
    cfg = BenchConfig(ops=("all_reduce", "all_gather"), min_bytes=1024, max_bytes=4096, iters=3, warmup=1,
                      repeat=2, average=3, run=RunOptions(nproc=2, db_path=str(tmp_path / "r.db"), label="rep"))
    result = run_bench(cfg, emit=lines.append)
    assert (result.status, result.exit_code) == ("complete", 0)
    stored = ResultStore(tmp_path / "r.db").rows(result.run_id)
    assert len(stored) == 2 * 3 * 2  # ops x sizes x placements, once each despite two repeats
    for row in stored:
        assert row.repeats == 2 and len(row.times_us) == 2
        assert row.time_us_min <= row.time_us <= row.time_us_max
        assert row.nwrong == 0
    run = ResultStore(tmp_path / "r.db").get_run(result.run_id)
    assert run.label == "rep" and run.config["average"] == 3 and run.config["validation"] == 1
    assert run.versions["torch"] and run.versions["linkscope"]
    assert sum("(repeat 2 of 2)" in line for line in lines) == 2
    assert sum("mean over 2 repeats" in line for line in lines) == 2


def test_one_rank_reports_zero_bus_bandwidth_like_nccl_tests(tmp_path: Path) -> None:
    cfg = BenchConfig(ops=("all_reduce", "broadcast"), min_bytes=4096, max_bytes=4096, iters=2, warmup=1,
                      run=RunOptions(nproc=1, db_path=str(tmp_path / "r.db"), quiet=True))
    result = run_bench(cfg, emit=lambda line: None)
    assert result.exit_code == 0
    by_op = {row.op: row for row in result.rows if row.placement == "out_of_place"}
    assert by_op["all_reduce"].busbw == 0.0 and by_op["all_reduce"].algbw > 0
    assert by_op["broadcast"].busbw == by_op["broadcast"].algbw


def _job(**kwargs: object) -> Job:
    return Job("bench", BenchConfig(**kwargs).validated())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("job", "backend", "world", "message"),
    [
        (_job(ops=("sendrecv",)), "gloo", 1, "sendrecv needs at least 2 ranks"),
        (_job(ops=("broadcast",), root=2), "gloo", 2, "root: 2 is not a rank"),
        (_job(dtype="int8", redop="avg"), "gloo", 2, "gloo cannot average int8"),
        (_job(cudagraph=3), "gloo", 2, "needs the nccl backend"),
        (Job("p2p", BenchConfig()), "gloo", 1, "p2p needs at least 2 ranks"),
    ],
)
def test_impossible_runs_are_refused_before_any_rank_starts(job: Job, backend: str, world: int, message: str) -> None:
    with pytest.raises(UserError, match=message):
        check_world(job, backend, world)


def test_avg_on_integers_is_fine_for_non_reducing_ops() -> None:
    check_world(_job(ops=("all_gather",), dtype="int8", redop="avg"), "gloo", 2)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the message shown without CUDA")
def test_nccl_without_cuda_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="^backend: nccl needs CUDA"):
        run_bench(BenchConfig(run=RunOptions(backend="nccl", db_path=str(tmp_path / "r.db"))))


def test_captured_nccl_log_is_judged_against_the_probed_system() -> None:
    from linkscope.bench.nccl_capture import log_extra
    from linkscope.hardware.loader import load_db
    from linkscope.hardware.serialize import system_dict

    # A real line shape (nccl-tests#166): an intra-node pair over shared memory instead of NVLink P2P.
    line = "ubuntu:39964:40050 [6] NCCL INFO Channel 09 : 6[6] -> 7[7] via SHM/direct/direct\n"
    judged = log_extra({"nccl.a.1.log": line}, system_dict(load_db().systems["dgx-h100"]))
    assert ("fallback", "shm-instead-of-p2p") in {(f["severity"], f["code"]) for f in judged["analysis"]["findings"]}
    unjudged = log_extra({"nccl.a.1.log": line})
    assert all(f["severity"] != "fallback" for f in unjudged["analysis"]["findings"])
