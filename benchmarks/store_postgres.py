"""The PostgreSQL store against the SQLite store on the same work: 16 concurrent writers, each a run of 50 sizes
committed one size at a time (as `bench` commits them), then every row read back and counted.

Starts a throwaway PostgreSQL server (Debian's `postgresql` binaries, as the tests do) and prints each store's
wall time, the rows found (must be 16 x 50 x 2 on both) and the ratio Postgres time / SQLite time (target <= 2).

    python benchmarks/store_postgres.py
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from linkscope.results.records import CollectiveRow, RunInfo  # noqa: E402
from linkscope.results.store import ResultStore  # noqa: E402
from tests.pg_server import PgServer  # noqa: E402

WRITERS, SIZES, ROUNDS = 16, 50, 3


def _writer(location: str, index: int, start) -> None:  # noqa: ANN001 - a multiprocessing barrier
    start.wait()
    with ResultStore(location) as store:
        run_id = store.create_run(RunInfo(kind="bench", label=f"writer-{index}"))
        for size in range(SIZES):
            store.add_rows(run_id, [
                CollectiveRow(op="all_reduce", size_bytes=8 << size % 30, count=2 << size % 30, dtype="float",
                              redop="sum", root=-1, placement=placement, time_us=10.0 + size, algbw=1.0, busbw=1.5,
                              nwrong=0, world_size=16)
                for placement in ("out_of_place", "in_place")])
        store.finish_run(run_id, "complete")


def timed(location: str) -> tuple[float, int]:
    """Seconds for the writers and the read-back, and the rows read back."""
    ResultStore(location).close()  # the schema exists before the clock starts, on both engines
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(WRITERS + 1)
    procs = [ctx.Process(target=_writer, args=(location, i, start)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    start.wait()
    began = time.perf_counter()
    for p in procs:
        p.join()
    with ResultStore(location) as store:
        rows = sum(len(store.rows(run.run_id)) for run in store.list_runs())
    elapsed = time.perf_counter() - began
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit(f"a writer failed on {location}")
    return elapsed, rows


def main() -> None:
    reason = PgServer.missing()
    if reason is not None:
        raise SystemExit(f"cannot start PostgreSQL: {reason}")
    server = PgServer.start()
    try:
        sqlite_s, pg_s = [], []
        for _ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as tmp:
                seconds, sqlite_rows = timed(str(Path(tmp) / "runs.db"))
                sqlite_s.append(seconds)
            seconds, pg_rows = timed(server.create_database())
            pg_s.append(seconds)
    finally:
        server.stop()
    expected = WRITERS * SIZES * 2
    best_sqlite, best_pg = min(sqlite_s), min(pg_s)
    print(f"{WRITERS} writers x {SIZES} sizes, one commit per size, best of {ROUNDS}")
    print(f"sqlite    {best_sqlite:6.2f} s  rows {sqlite_rows}/{expected}")
    print(f"postgres  {best_pg:6.2f} s  rows {pg_rows}/{expected}")
    print(f"postgres / sqlite = {best_pg / best_sqlite:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
