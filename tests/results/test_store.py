"""ResultStore: round trips, ids and prefixes, listing, updates, and rows committed as they are added."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.results.records import CollectiveRow, PairRow, RunInfo
from linkscope.results.store import ResultStore, default_db_path


def row(size: int, placement: str = "out_of_place", op: str = "all_reduce", **kw) -> CollectiveRow:
    values = dict(op=op, size_bytes=size, count=size // 4, dtype="float", redop="sum", root=-1,
                  placement=placement, time_us=10.0 + size / 1e3, algbw=1.5, busbw=2.625, nwrong=0, world_size=8)
    return CollectiveRow(**{**values, **kw})


@pytest.fixture
def store(tmp_path: Path):
    with ResultStore(tmp_path / "runs.db") as s:
        yield s


def full_info() -> RunInfo:
    return RunInfo(kind="bench", label="dgx", hosts=["a", "b"], world_size=16, nodes=2, backend="nccl",
                   versions={"torch": "2.4.0", "nccl": "2.21.5"}, nccl_env={"NCCL_ALGO": "Ring"},
                   system={"id": "dgx-h100", "nodes": 2, "scale_up": {"kind": "nvswitch"}},
                   config={"sizes": [8, 1024], "iters": 20}, groups={"host_of_rank": ["a"] * 8 + ["b"] * 8},
                   command="linkscope bench --op all_reduce", extra={"transport": "NET/IB"})


def test_run_round_trip(store):
    info = full_info()
    run_id = store.create_run(info)
    assert re.fullmatch(r"[0-9a-f]{8}", run_id)
    back = store.get_run(run_id)
    assert back.status == "running" and back.ended_at is None
    assert (info.run_id, info.started_at, info.status) == (run_id, back.started_at, "running")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", back.started_at)
    for name in ("kind", "label", "hosts", "world_size", "nodes", "backend", "versions", "nccl_env", "system",
                 "config", "groups", "command", "extra"):
        assert getattr(back, name) == getattr(info, name), name


def test_given_start_time_is_kept(store):
    run_id = store.create_run(RunInfo(kind="import", started_at="2025-01-02T03:04:05+00:00"))
    assert store.get_run(run_id).started_at == "2025-01-02T03:04:05+00:00"


def test_rows_round_trip_with_every_field(store):
    run_id = store.create_run(RunInfo(kind="bench"))
    rows = [row(8, times_us=[10.0, 10.5, 9.5], repeats=3, time_us_min=9.5, time_us_max=10.5, time_us_stdev=0.5,
                iters=20),
            row(8, "in_place", nwrong=None, max_error=2e-7, iter_stats={"p99_us": 12.0}),
            row(1024, op="all_gather", root=0)]
    store.add_rows(run_id, rows)
    assert store.rows(run_id) == rows
    assert store.rows(run_id, op="all_gather") == rows[2:]


def test_pair_rows_round_trip(store):
    run_id = store.create_run(RunInfo(kind="p2p"))
    pairs = [PairRow(0, 1, 1 << 20, 150.0, 290.5, 2.5), PairRow(1, 0, 1 << 20, None, None, None)]
    store.add_pair_rows(run_id, pairs)
    assert store.pair_rows(run_id) == pairs
    [summary] = store.list_runs()
    assert summary.n_rows == 2 and summary.ops == ["p2p"]


def test_rows_are_visible_to_another_store_before_the_run_finishes(tmp_path):
    path = tmp_path / "runs.db"
    with ResultStore(path) as writer:
        run_id = writer.create_run(RunInfo(kind="bench"))
        writer.add_rows(run_id, [row(8)])
        # Another process (here: another connection) sees the committed row while the run is still going.
        with ResultStore(path) as reader:
            assert len(reader.rows(run_id)) == 1 and reader.get_run(run_id).status == "running"
        writer.add_rows(run_id, [row(16)])
    with ResultStore(path) as reader:
        assert [r.size_bytes for r in reader.rows(run_id)] == [8, 16]


def test_update_and_finish(store):
    run_id = store.create_run(RunInfo(kind="bench"))
    store.update_run(run_id, system={"id": "x"}, groups={"nodes": 1}, versions={"nccl": "2.20.3"})
    store.finish_run(run_id, "failed", error="rank 3 died")
    info = store.get_run(run_id)
    assert (info.system, info.groups, info.versions) == ({"id": "x"}, {"nodes": 1}, {"nccl": "2.20.3"})
    assert (info.status, info.error) == ("failed", "rank 3 died") and info.ended_at is not None
    with pytest.raises(TypeError, match="no_such_field"):
        store.update_run(run_id, no_such_field=1)
    with pytest.raises(TypeError, match="run_id"):
        store.update_run(run_id, run_id="other")
    with pytest.raises(UserError, match="no run 'deadbeef'"):
        store.update_run("deadbeef", label="x")


def test_prefix_ids(store):
    ids = [store.create_run(RunInfo(kind="bench")) for _ in range(40)]
    target = ids[0]
    unique = next(target[:n] for n in range(1, 9) if sum(i.startswith(target[:n]) for i in ids) == 1)
    assert store.get_run(unique).run_id == target
    assert store.get_run(target.upper()).run_id == target
    assert store.rows(unique) == []


def test_ambiguous_and_unknown_ids_are_user_errors(store):
    ids = [store.create_run(RunInfo(kind="bench")) for _ in range(40)]
    shared = next(p for p in "0123456789abcdef" if sum(i.startswith(p) for i in ids) > 1)
    with pytest.raises(UserError, match="ambiguous"):
        store.get_run(shared)
    with pytest.raises(UserError, match="no run 'zz'"):
        store.get_run("zz")
    with pytest.raises(UserError, match="no run"):
        store.get_run("%")  # LIKE wildcards are matched literally
    with pytest.raises(UserError):
        store.get_run("  ")


def test_list_runs_newest_first_with_filters(store):
    old = store.create_run(RunInfo(kind="bench", label="a", started_at="2025-01-01T00:00:00+00:00"))
    new = store.create_run(RunInfo(kind="import", label="b", started_at="2025-06-01T00:00:00+00:00"))
    mid = store.create_run(RunInfo(kind="bench", label="b", started_at="2025-03-01T00:00:00+00:00"))
    store.add_rows(mid, [row(8), row(8, "in_place"), row(8, op="broadcast")])
    assert [s.run_id for s in store.list_runs()] == [new, mid, old]
    assert [s.run_id for s in store.list_runs(limit=2)] == [new, mid]
    assert [s.run_id for s in store.list_runs(kind="bench")] == [mid, old]
    assert [s.run_id for s in store.list_runs(label="b", kind="bench")] == [mid]
    summary = store.list_runs(kind="bench")[0]
    assert (summary.n_rows, summary.ops, summary.status) == (3, ["all_reduce", "broadcast"], "running")


def test_delete_run(store):
    keep = store.create_run(RunInfo(kind="bench"))
    gone = store.create_run(RunInfo(kind="bench"))
    store.add_rows(gone, [row(8)])
    store.add_pair_rows(gone, [PairRow(0, 1, 8, 1.0, 2.0, 3.0)])
    assert store.delete_run(gone) == gone
    assert [s.run_id for s in store.list_runs()] == [keep]
    with pytest.raises(UserError):
        store.rows(gone)


def test_non_finite_numbers_are_refused_before_anything_is_written(store):
    run_id = store.create_run(RunInfo(kind="bench"))
    with pytest.raises(ValueError, match="time_us is nan"):
        store.add_rows(run_id, [row(8), row(16, time_us=math.nan)])
    assert store.rows(run_id) == []


def test_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LINKSCOPE_DB", str(tmp_path / "deep" / "dir" / "my.db"))
    assert default_db_path() == tmp_path / "deep" / "dir" / "my.db"
    with ResultStore() as s:
        assert s.path == tmp_path / "deep" / "dir" / "my.db"
    assert (tmp_path / "deep" / "dir" / "my.db").is_file()
    monkeypatch.delenv("LINKSCOPE_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "linkscope" / "runs.db"
