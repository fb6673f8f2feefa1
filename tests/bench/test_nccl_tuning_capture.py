"""NCCL's TUNING lines captured with a run: thinned, matched to the run's rows, stored, shown and compared.

No GPU here: the log texts are recorded real lines (tests/fixtures/probe/nccl_tuning_*.log, sources in each file)."""

from __future__ import annotations

import os
from pathlib import Path

from linkscope.bench import nccl_capture
from linkscope.report.compare import choice_lines, compare_runs
from linkscope.results.export import nccl_choice_lines
from linkscope.results.records import CollectiveRow, RunInfo
from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli
from tests.probe.fixtures import PROBE_FIXTURES


def _row(op: str, size: int) -> CollectiveRow:
    return CollectiveRow(op=op, size_bytes=size, count=size // 4, dtype="float", redop="none", root=0,
                         placement="out_of_place", time_us=10.0, algbw=1.0, busbw=1.0, nwrong=0, world_size=2)


def test_capture_asks_nccl_for_its_tuning_lines_and_restores_the_environment(monkeypatch) -> None:  # noqa: ANN001
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"):
        monkeypatch.delenv(name, raising=False)
    with nccl_capture.capture("nccl") as log_dir:
        assert log_dir is not None and os.environ["NCCL_DEBUG_SUBSYS"] == "INIT,BOOTSTRAP,ENV,TUNING"
        assert os.environ["NCCL_DEBUG_FILE"].startswith(str(log_dir))  # files, never the terminal
    assert "NCCL_DEBUG_SUBSYS" not in os.environ and "NCCL_DEBUG" not in os.environ


def test_thinning_keeps_a_few_tuning_lines_per_size_and_every_other_line() -> None:
    line = "h:1:1 [0] NCCL INFO AllReduce: {} Bytes -> Algo RING proto LL channel{{Lo..Hi}}={{0..1}}\n"
    text = ["h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"]
    text += [line.format(size) for size in (8, 16) for _ in range(1000)]
    kept = nccl_capture.thinned(text).splitlines()
    assert len(kept) == 1 + 2 * nccl_capture.TUNING_LINES_PER_SIZE and "via P2P" in kept[0]


def test_choices_go_onto_the_rows_and_into_the_store(tmp_path: Path) -> None:
    texts = {"nccl.host.1.log": (PROBE_FIXTURES / "nccl_tuning_named.log").read_text()}
    extra = nccl_capture.log_extra(texts)
    rows = [_row("broadcast", 32768), _row("broadcast", 65536), _row("broadcast", 999)]
    changed = nccl_capture.apply_choices(rows, extra["analysis"]["tuning"], world=2)
    assert changed == rows[:2] and rows[2].nccl_algo is None
    assert (rows[1].nccl_algo, rows[1].nccl_proto, rows[1].nccl_channels) == ("RING", "SIMPLE", 2)
    with ResultStore(tmp_path / "r.db") as store:
        run_id = store.create_run(RunInfo(kind="bench", backend="nccl", world_size=2))
        store.add_rows(run_id, [_row("broadcast", 32768), _row("broadcast", 65536)])
        store.set_nccl_choices(run_id, changed)
        assert [(r.nccl_algo, r.nccl_channels) for r in store.rows(run_id)] == [("RING", 1), ("RING", 2)]
    shown = run_cli("runs", "show", run_id, "--db", str(tmp_path / "r.db"))
    assert "what NCCL chose" in shown.stdout and "65536 B  RING/SIMPLE x2" in shown.stdout
    assert nccl_choice_lines(rows, {("broadcast", 32768): ("RING", "LL")})[1].endswith("model: RING/LL")


def test_the_numeric_form_goes_to_the_only_op_of_the_run() -> None:
    texts = {"nccl.h.1.log": (PROBE_FIXTURES / "nccl_tuning_numeric.log").read_text()}
    rows = [_row("all_reduce", 256), _row("all_reduce", 262144)]
    nccl_capture.apply_choices(rows, nccl_capture.log_extra(texts)["analysis"]["tuning"], world=2)
    assert [(r.nccl_algo, r.nccl_proto) for r in rows] == [("TREE", "LL"), ("TREE", "LL128")]


def test_compare_says_when_nccl_chose_differently() -> None:
    base = [_row("all_reduce", 1 << 26)]
    other = [_row("all_reduce", 1 << 26)]
    base[0].nccl_algo, base[0].nccl_proto = "RING", "LL128"
    other[0].nccl_algo, other[0].nccl_proto = "NVLS", "SIMPLE"
    data = compare_runs([(RunInfo(kind="bench", run_id="aaaa0000"), base),
                         (RunInfo(kind="bench", run_id="bbbb1111"), other)])
    assert choice_lines(data) == ["NCCL chose differently: run bbbb1111 at 64M: NVLS/SIMPLE (run aaaa0000: RING/LL128)"]
