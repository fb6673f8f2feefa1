"""`linkscope check --from FILE|RUN_ID`: judge a recorded nccl-tests (or rccl-tests) output, or a stored run, with
the items and thresholds of a live check, so an operator can check the logs of nodes linkscope did not launch.

What an output cannot show (NVLink link state, GPU memory, the pairwise matrix, RDMA ports) is SKIP with the reason;
the rest (GPU count and model from the device lines, bandwidth against the model and the published floors,
latency, wrong results, the NCCL log where the output carries one, a test that died midway) is judged as live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from linkscope.check.items import CheckItem, Status, Thresholds, verdict
from linkscope.check import rules
from linkscope.check.run import CheckResult, expected_system, not_comparable_reason, predictions
from linkscope.check.sizing import bandwidth_context
from linkscope.hardware.errors import UserError
from linkscope.hardware.serialize import system_dict
from linkscope.hardware.system import System
from linkscope.results.records import CollectiveRow, RunInfo
from linkscope.results.store import ResultStore

_NOT_SHOWN = {
    "gpus.memory": ("GiB", "a recorded output does not show GPU memory"),
    "nvlink.links": ("links", "a recorded output does not show NVLink link state (`nvidia-smi nvlink -s` does)"),
    "topology.kind": ("", "a recorded output does not show how the GPUs are joined (`nvidia-smi topo -m` does)"),
    "p2p.bandwidth": ("GB/s", "a recorded output has no pairwise matrix (`linkscope p2p` measures one)"),
    "scale_out.ports": ("ports", "a recorded output does not show the RDMA ports (`ibstat` does)"),
}


@dataclass
class Recorded:
    """What a recorded output or stored run shows, in the terms the rules use."""

    source: str
    rows: list[CollectiveRow]
    world: int
    hosts: list[str]
    devices: list[dict[str, Any]] = field(default_factory=list)
    backend: str = "nccl-tests"
    gpus_per_thread: int = 1
    failure: str = ""
    cut_short: bool = False
    nccl_log: str = ""


def load_recorded(source: str, db_path: str | None) -> Recorded:
    """A file when `source` names one, else a stored run's id (or a unique prefix of it)."""
    path = Path(source)
    if path.exists() or path.is_symlink():
        return _from_file(path)
    try:
        with ResultStore(db_path) as store:
            info = store.get_run(source)
            rows = store.rows(info.run_id)
    except UserError:
        raise UserError(f"'{source}' is neither a file nor a stored run id", field="from") from None
    return _from_run(info, rows)


def _from_file(path: Path) -> Recorded:
    from linkscope.hardware.errors import read_input_bytes
    from linkscope.results.nccltests.importer import MAX_FILE_BYTES, check_one_run_per_op, parse_nccl_tests_file

    parsed = parse_nccl_tests_file(path)
    if not parsed.rows:
        why = f"the test failed before printing any result ({parsed.failures[0]})" if parsed.failures else \
            "no nccl-tests result rows found (not an nccl-tests or rccl-tests output?)"
        raise UserError(f"{path}: {why}")
    check_one_run_per_op(path, parsed)
    config = parsed.sections[0].config if parsed.sections else {}
    ngpus = config.get("ngpus")
    per_thread = ngpus if isinstance(ngpus, int) else 1
    text = read_input_bytes(path, "nccl-tests output", MAX_FILE_BYTES).decode("utf-8", errors="replace")
    devices = [{"rank": d.rank, "host": d.host, "name": d.name} for s in parsed.sections for d in s.devices]
    return Recorded(source=str(path), rows=parsed.rows, world=parsed.world_size, hosts=parsed.hosts, devices=devices,
                    backend="rccl-tests" if parsed.library == "rccl" else "nccl-tests",
                    gpus_per_thread=max(1, per_thread), failure=str(parsed.failures[0]) if parsed.failures else "",
                    cut_short=any(s.rows and s.avg_busbw is None for s in parsed.sections),
                    nccl_log=text if "NCCL INFO" in text else "")


def _from_run(info: RunInfo, rows: list[CollectiveRow]) -> Recorded:
    if not rows:
        raise UserError(f"run {info.run_id} has no collective measurements (status {info.status}); nothing to check")
    ranks = info.groups.get("ranks") if isinstance(info.groups, dict) else None
    devices = [d for d in ranks if isinstance(d, dict) and "host" in d] if isinstance(ranks, list) else []
    files = (info.extra.get("nccl_log") or {}).get("files") or {}
    return Recorded(source=f"run {info.run_id}", rows=rows, world=info.world_size, hosts=list(info.hosts),
                    devices=devices, backend=info.backend,
                    failure=(info.error or "") if info.status == "failed" else "",
                    nccl_log="\n".join(str(t) for t in files.values()) if isinstance(files, dict) else "")


def recorded_items(rec: Recorded, expected: System, thresholds: Thresholds,
                   floors_file: str | None = None) -> list[CheckItem]:
    """Every check item for a recorded output against `expected`."""
    nodes = max(1, len(rec.hosts))
    target = expected.with_nodes(nodes) if nodes > expected.nodes else expected
    items = [_completed_item(rec), *_gpu_items(rec, expected)]
    items += [CheckItem(name, "SKIP", None, None, unit, f"expected System {expected.id}", why)
              for name, (unit, why) in _NOT_SHOWN.items()]
    world = rec.world or 0
    if world:
        predicted, reason = predictions(target, rec.rows, world, rec.gpus_per_thread)
    else:
        predicted, reason = None, "the output lists no devices, so its rank count is unknown"
    context = bandwidth_context(target, sorted({r.op for r in rec.rows}), world, nodes,
                                not_comparable_reason(rec.backend, expected), "the output stops there; measure "
                                "up to the plateau (`linkscope check --full`, or nccl-tests -e 16G)", floors_file)
    items += rules.collective_items(rec.rows, predicted, reason, thresholds,
                                    f"model prediction for {target.id} at {world} ranks", context)
    items += rules.transport_items(_log_report(rec, expected),
                                   "the output has no NCCL INFO lines (run with NCCL_DEBUG=INFO to see transports)")
    return items


def _completed_item(rec: Recorded) -> CheckItem:
    src = "the recorded output"
    if rec.failure:
        return CheckItem("run.completed", "FAIL", "failed", "completed", "", src,
                         f"the test died midway: {rec.failure}; its rows up to there are judged below")
    if rec.cut_short:
        return CheckItem("run.completed", "WARN", "no footer", "completed", "", src,
                         "the output ends without nccl-tests' footer: cut short, or pasted in part")
    return CheckItem("run.completed", "PASS", "completed", "completed", "", src)


def _gpu_items(rec: Recorded, expected: System) -> list[CheckItem]:
    from linkscope.hardware.loader import load_db

    src = f"expected System {expected.id}"
    if not rec.devices:
        why = "the output lists no devices (`# Rank ... device ...` lines)"
        return [CheckItem("gpus.count", "SKIP", None, expected.node.gpus, "GPUs", src, why),
                CheckItem("gpus.model", "SKIP", None, expected.node.gpu.id, "", src, why)]
    per_host: dict[str, int] = {}
    for d in rec.devices:
        per_host[str(d.get("host"))] = per_host.get(str(d.get("host")), 0) + 1
    have, want = max(per_host.values()), expected.node.gpus
    status: Status = "PASS" if have == want else ("FAIL" if have < want else "WARN")
    count = CheckItem("gpus.count", status, have, want, "GPUs per node", src, "" if status == "PASS" else
                      f"{have} GPUs on the busiest of {len(per_host)} host(s), {want} promised: a run on fewer GPUs "
                      "than the node has, or another node type")
    names = sorted({str(d.get("name") or "").strip() for d in rec.devices} - {""})
    db = load_db()
    found = {name: db.gpu(name) for name in names}
    unknown = [n for n, g in found.items() if g is None]
    if not names or unknown:
        return [count, CheckItem("gpus.model", "SKIP", ", ".join(names) or None, expected.node.gpu.id, "", src,
                                 f"device name {unknown[0]!r} is not a GPU linkscope knows" if unknown else
                                 "the device lines name no GPU")]
    ids = sorted({g.id for g in found.values() if g is not None})
    ok = ids == [expected.node.gpu.id]
    return [count, CheckItem("gpus.model", "PASS" if ok else "FAIL", ", ".join(ids), expected.node.gpu.id, "", src,
                             "" if ok else "a different GPU model than promised")]


def _log_report(rec: Recorded, expected: System) -> Any:
    if not rec.nccl_log:
        return None
    from linkscope.probe.nccl_findings import Expectations
    from linkscope.probe.nccl_log import analyse_nccl_log

    report = analyse_nccl_log(rec.nccl_log, Expectations.from_system(expected), source=rec.source)
    return report if report.log.nccl_lines else None


def check_recorded(source: str, expect: str, thresholds: Thresholds, db_path: str | None,
                   floors_file: str | None = None) -> CheckResult:
    """Judge a recorded output or stored run against `expect` and store the verdict as a check run."""
    thresholds = thresholds.validated()
    expected = expected_system(expect)
    rec = load_recorded(source, db_path)
    items = recorded_items(rec, expected, thresholds, floors_file)
    status = verdict(items)
    info = RunInfo(kind="check", label="check --from", world_size=rec.world, backend=rec.backend, hosts=rec.hosts,
                   config={"from": rec.source, "expect": expect},
                   extra={"check": {"verdict": status, "expected_system": expected.id, "from": rec.source,
                                    "expected": system_dict(expected), "items": [i.to_dict() for i in items]}})
    with ResultStore(db_path or None) as store:
        run_id = store.create_run(info)
        store.add_rows(run_id, rec.rows)
        store.finish_run(run_id, "complete")
    return CheckResult(status, run_id, expected.id, items)
