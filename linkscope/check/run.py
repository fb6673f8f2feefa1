"""Running `linkscope check`: probe, resolve the expectation, measure (bench + p2p), apply the rules, store the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from linkscope.check.items import CheckItem, Status, Thresholds, verdict
from linkscope.check import rules
from linkscope.check.sizing import QUICK_MAX_BYTES, SweepPlan, bandwidth_context, full_sweep
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import system_dict
from linkscope.hardware.system import System
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore

Mode = Literal["quick", "full"]
CHECK_OPS = ("all_reduce", "all_gather")
_ITERS = {"quick": (5, 2), "full": (20, 5)}
_P2P_BYTES = {"quick": 1 << 20, "full": 64 << 20}


@dataclass
class CheckOptions:
    """What `linkscope check` was asked."""

    expect: str | None = None
    mode: Mode = "quick"
    thresholds: Thresholds = field(default_factory=Thresholds)
    db_path: str | None = None
    nproc: int | None = None
    oversubscribe: bool = False
    floors_file: str | None = None
    """A health-check floors file to use instead of the published one (`--floors`)."""


@dataclass
class CheckResult:
    """The verdict, the items, and the stored run."""

    verdict: Status
    run_id: str
    expected_system: str
    items: list[CheckItem]

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document."""
        return {"verdict": self.verdict, "run_id": self.run_id, "expected_system": self.expected_system,
                "items": [i.to_dict() for i in self.items]}


def resolve_expected(spec: str | None, probed: System | None, probe_reason: str | None) -> System:
    """The System to check against: an offering, preset or file; the probed System by default."""
    if spec is None:
        if probed is None:
            raise UserError(f"the probe could not build this machine's System ({probe_reason}); give --expect")
        return probed
    return expected_system(spec)


def expected_system(spec: str) -> System:
    """`--expect`: a preset, offering, System file or `profile:NAME` (a GPU profile's System), as `--system` takes;
    a UserError names `--expect`."""
    from linkscope.model.calibration.systems import resolve

    try:
        return resolve(spec, load_db()).system
    except UserError as exc:
        raise UserError(exc.message, field="expect" if exc.field in (None, "system") else exc.field) from None


def predictions(expected: System, rows: list[Any], world: int,
                gpus_per_thread: int = 1) -> tuple[dict[str, dict[int, Any]] | None, str]:
    """The model's prediction for every op and size of `rows` on `world` GPUs of `expected`; None and the reason
    where the model cannot say (a CPU host, an op or size it does not model)."""
    from linkscope.model.comm.predict import predict_sizes

    out: dict[str, dict[int, Any]] = {}
    try:
        for op in sorted({r.op for r in rows}):
            sizes = sorted({r.size_bytes for r in rows if r.op == op and r.size_bytes > 0})
            if sizes:
                out[op] = {p.bytes: p for p in predict_sizes(expected, op, sizes, gpus=min(world, expected.gpus),
                                                             gpus_per_thread=gpus_per_thread)}
    except (UserError, ValueError) as exc:
        return None, f"no model prediction: {exc}"
    return out, ""


def not_comparable_reason(backend: str, expected: System) -> str:
    """Collectives over gloo on CPU ranks say nothing about a GPU System's NVLink or InfiniBand: why they are not
    judged against its model (empty when they can be)."""
    if backend in ("nccl", "rccl", "nccl-tests", "rccl-tests") or expected.is_cpu_host:
        return ""
    return (f"measured over {backend} on CPU ranks: not comparable with {expected.id}'s NVLink/InfiniBand model "
            "(run on the GPUs, with NCCL, to judge the interconnect)")


def _sweep_plan(opts: CheckOptions, probe: Any, expected: System) -> SweepPlan:
    """The largest size of the sweep: 1 MiB for --quick; for --full the plateau, bounded by memory."""
    if opts.mode == "quick":
        return SweepPlan(QUICK_MAX_BYTES, "--quick")
    from linkscope.probe.host import available_memory_bytes

    memories = [g.memory_free_gib or g.memory_gib for g in probe.gpus if (g.memory_free_gib or g.memory_gib)]
    world = opts.nproc or (len(probe.gpus) if probe.gpus else 2)
    return full_sweep(expected, CHECK_OPS, world, bool(probe.gpus), min(memories) * 2**30 if memories else None,
                      available_memory_bytes(), opts.floors_file)


def _transport(result: Any, expected: System) -> tuple[Any, str]:
    """The run's NCCL log analysed against what the expected System promises; None with the reason on gloo."""
    from linkscope.probe.nccl_findings import Expectations
    from linkscope.probe.nccl_log import analyse_nccl_log

    if result.info is None or result.info.backend != "nccl":
        return None, f"backend {getattr(result.info, 'backend', '?')}: NCCL writes no log, no transport to check"
    files = result.info.extra.get("nccl_log", {}).get("files", {})
    if not files:
        return None, "NCCL wrote no log for this run"
    return analyse_nccl_log("\n".join(files.values()), Expectations.from_system(expected), source="check"), ""


def run_check(opts: CheckOptions) -> CheckResult:
    """Probe and measure this machine and judge it against the expected System; the result is stored as a run."""
    from linkscope.bench.config import BenchConfig, P2PConfig, RunOptions
    from linkscope.bench.runner import run_bench, run_p2p
    from linkscope.probe import probe_machine, to_system

    thresholds = opts.thresholds.validated()
    probe = probe_machine()
    probed = to_system(probe)
    expected = resolve_expected(opts.expect, probed.system, probed.reason)
    items = rules.gpu_items(probe, probed.system, expected)
    items += rules.nvlink_items(probe, probed.system, expected)
    items.append(rules.topology_item(probed.system, expected))
    items += rules.fabric_items(probe, expected)

    iters, warmup = _ITERS[opts.mode]
    run_opts = RunOptions(nproc=opts.nproc, db_path=opts.db_path, quiet=True, label="check",
                          oversubscribe=opts.oversubscribe)
    plan = _sweep_plan(opts, probe, expected)
    bench = run_bench(BenchConfig(ops=CHECK_OPS, min_bytes=8, max_bytes=plan.max_bytes, step_factor=4 if
                                  opts.mode == "quick" else 2, iters=iters, warmup=warmup, run=run_opts),
                      emit=lambda line: None)
    world = bench.info.world_size if bench.info is not None else 0
    pairs = None
    if world >= 2:
        pairs = run_p2p(P2PConfig(size_bytes=_P2P_BYTES[opts.mode], iters=iters, warmup=warmup,
                                  latency_iters=20 if opts.mode == "quick" else 100, run=run_opts),
                        emit=lambda line: None)
    items += rules.pair_items(pairs.pair_rows if pairs is not None else [], thresholds)
    predicted, reason = predictions(expected, bench.rows, world)
    backend = bench.info.backend if bench.info is not None else "?"
    context = bandwidth_context(expected, sorted({r.op for r in bench.rows}), world, 1,
                                not_comparable_reason(backend, expected),
                                "run --full" if opts.mode == "quick" else plan.reason, opts.floors_file)
    items += rules.collective_items(bench.rows, predicted, reason, thresholds,
                                    f"model prediction for {expected.id} at {world} ranks", context)
    report, why = _transport(bench, expected)
    items += rules.transport_items(report, why)
    items += rules.scale_out_items(probe, expected, thresholds=thresholds)
    return _store(opts, expected, items, bench, pairs)


def _store(opts: CheckOptions, expected: System, items: list[CheckItem], bench: Any, pairs: Any) -> CheckResult:
    status = verdict(items)
    measured = bench.info or RunInfo(kind="check")
    info = RunInfo(kind="check", label="check", world_size=measured.world_size, backend=measured.backend,
                   versions=measured.versions, nccl_env=measured.nccl_env, system=measured.system,
                   hosts=measured.hosts,
                   config={"mode": opts.mode, "expect": opts.expect,
                           "max_bytes": max((r.size_bytes for r in bench.rows), default=0)},
                   extra={"check": {"verdict": status, "expected_system": expected.id,
                                    "expected": system_dict(expected), "items": [i.to_dict() for i in items],
                                    "bench_run": bench.run_id, "p2p_run": pairs.run_id if pairs else None}})
    with ResultStore(opts.db_path or None) as store:
        run_id = store.create_run(info)
        store.add_rows(run_id, bench.rows)
        if pairs is not None:
            store.add_pair_rows(run_id, pairs.pair_rows)
        store.finish_run(run_id, "complete")
    return CheckResult(status, run_id, expected.id, items)
