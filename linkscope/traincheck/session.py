"""One `bench train` invocation: the points to measure (one, a `--sweep` or a `--scaling`), the prediction and
memory check before any rank starts, the measurement, the trace analysis, and one document per point."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from linkscope.bench.comm import default_nproc, resolve_backend
from linkscope.bench.layout import torchrun_env
from linkscope.bench.train.config import SWEEP_KEYS, TrainConfig, check_backend, check_layout, resolved_precision
from linkscope.bench.train.runner import Emit, TrainPlan, TrainRunResult, check_scaling_counts, run_points
from linkscope.bench.train.trace_comm import analyze
from linkscope.hardware.errors import UserError
from linkscope.traincheck.document import point_document
from linkscope.traincheck.predict import Prediction, check_fits, predict_point
from linkscope.traincheck.verdicts import scaling_rows, sweep_verdict


@dataclass
class TrainRequest:
    """What the command line asked for."""

    config: TrainConfig
    system: str | None = None
    sweep: str | None = None
    """`KEY=V1,V2,...` with KEY one of SWEEP_KEYS."""
    scaling: str | None = None
    """`1,2,4`: rank counts (under torchrun, the first that many ranks of the job)."""


@dataclass
class TrainOutcome:
    """The run and what was made of it."""

    result: TrainRunResult
    documents: list[dict[str, Any]] = field(default_factory=list)
    sweep: dict[str, Any] | None = None
    scaling: list[dict[str, Any]] | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """`--json`: the point's document for a single run; every point and the verdict otherwise."""
        if len(self.documents) == 1 and self.sweep is None and self.scaling is None:
            return self.documents[0]
        return {"run_id": self.result.run_id, "status": self.result.status, "points": self.documents,
                "sweep": self.sweep, "scaling": self.scaling}


def parse_sweep(spec: str) -> tuple[str, list[str]]:
    """`bucket-mb=1,25,100` -> ("bucket-mb", ["1", "25", "100"])."""
    key, sep, values = spec.partition("=")
    items = [v.strip() for v in values.split(",")]
    if not sep or key not in SWEEP_KEYS or len(items) < 2:
        raise UserError(f"--sweep: expected KEY=V1,V2,... with KEY one of {', '.join(SWEEP_KEYS)} and at least two "
                        f"values, got '{spec}'")
    if "" in items:
        raise UserError(f"--sweep: an empty value in '{spec}'")
    repeated = sorted({v for v in items if items.count(v) > 1})
    if repeated:
        raise UserError(f"--sweep: {', '.join(repeated)} given more than once in '{spec}'")
    return key, items


def parse_scaling(spec: str) -> list[int]:
    """`1,2,4` -> [1, 2, 4] (ascending, distinct, positive)."""
    try:
        counts = [int(v) for v in spec.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--scaling: expected rank counts like 1,2,4, got '{spec}'") from None
    if len(counts) < 2 or any(c < 1 for c in counts) or counts != sorted(set(counts)):
        raise UserError(f"--scaling: expected at least two ascending positive rank counts, got '{spec}'")
    return counts


def _swept(cfg: TrainConfig, key: str, value: str) -> TrainConfig:
    if key == "bucket-mb":
        try:
            return replace(cfg, bucket_mb=float(value))
        except ValueError:
            raise UserError(f"--sweep bucket-mb: '{value}' is not a number") from None
    if value.startswith("powersgd:"):  # a sweep over PowerSGD ranks reads like --comm-hook powersgd:R
        from linkscope.bench.train.config import parse_comm_hook

        name, rank = parse_comm_hook(value)
        return replace(cfg, grad_compression=name, powersgd_rank=rank)
    return replace(cfg, grad_compression=value)


def build_plans(req: TrainRequest) -> list[TrainPlan]:
    """The points to measure, validated."""
    for flag, given in (("--sweep", req.sweep), ("--scaling", req.scaling)):
        if given is not None and not given.strip():
            raise UserError(f"{flag}: empty; leave the option out to run one configuration")
    if req.sweep and req.scaling:
        raise UserError("give --sweep or --scaling, not both")
    base = req.config
    if req.sweep:
        key, values = parse_sweep(req.sweep)
        return [TrainPlan(f"{key}={v}", _swept(base, key, v).validated(), None, {key: v}) for v in values]
    if req.scaling:
        counts = parse_scaling(req.scaling)
        env = torchrun_env()
        if env is not None:
            check_scaling_counts(counts, env.world)
        return [TrainPlan(f"ranks={n}", base.validated(), n, {"ranks": n}) for n in counts]
    return [TrainPlan("", base.validated())]


def _settings(plan: TrainPlan, ranks: int, precision: str) -> dict[str, Any]:
    cfg = plan.config
    return {**plan.settings, "model": asdict(cfg.model), "micro_batch": cfg.micro_batch, "ranks": ranks,
            "tp": cfg.tp, "zero": cfg.zero, "recompute": cfg.recompute, "precision": precision,
            "layout": cfg.layout_on(ranks), "bucket_mb": cfg.bucket_mb, "overlap": cfg.overlap,
            "grad_compression": cfg.grad_compression,
            "powersgd_rank": cfg.powersgd_rank if cfg.grad_compression == "powersgd" else 0,
            "lora_rank": cfg.lora_rank, "lora_targets": cfg.lora_targets,
            "ep": cfg.ep}


def prepare_plans(req: TrainRequest, plans: list[TrainPlan]) -> tuple[list[TrainPlan], list[Prediction | None], str]:
    """Rank counts, predictions and the memory check, all before any rank starts."""
    from linkscope.bench.runinfo import probed_system

    backend = resolve_backend(plans[0].config.run.backend)
    env = torchrun_env()
    probed = probed_system() if backend == "nccl" and not req.system else None
    out, predictions, note = [], [], ""
    for plan in plans:
        if env is not None:
            ranks = plan.ranks or env.world
        else:
            ranks = plan.ranks or plan.config.run.nproc or default_nproc(backend)
        check_layout(plan.config, ranks)
        check_backend(plan.config, backend)
        precision = resolved_precision(plan.config, backend)
        prediction, note = predict_point(plan.config, ranks, precision, req.system, probed)
        check_fits(plan.config, ranks, precision, backend, prediction)
        predictions.append(prediction)
        out.append(replace(plan, ranks=ranks, settings=_settings(plan, ranks, precision)))
    return out, predictions, note


def same_threads(plans: list[TrainPlan]) -> list[TrainPlan]:
    """On CPU ranks every point gets the thread count of the largest one (unless OMP_NUM_THREADS decides)."""
    if resolve_backend(plans[0].config.run.backend) == "nccl" or "OMP_NUM_THREADS" in os.environ:
        return plans
    threads = max(1, (os.cpu_count() or 1) // max(p.ranks or 1 for p in plans))
    return [replace(p, config=replace(p.config, cpu_threads=p.config.cpu_threads or threads)) for p in plans]


def run_request(req: TrainRequest, emit: Emit | None = None) -> TrainOutcome:
    """Predict, check, measure, analyse; store the documents with the run."""
    plans, predictions, note = prepare_plans(req, build_plans(req))
    plans = same_threads(plans)
    result = run_points(plans, emit)
    outcome = TrainOutcome(result, note=note)
    if not result.run_id:  # a torchrun rank other than 0
        return outcome
    for point, prediction in zip(result.points, predictions):
        # Under multi-node torchrun the other nodes' traces stay on their hosts; analyse what is here.
        local = [Path(p) for p in point.trace_paths if Path(p).is_file()]
        trace = analyze(local) if local else None
        outcome.documents.append(point_document(result, point, prediction, trace))
    if req.sweep and outcome.documents:
        outcome.sweep = sweep_verdict(parse_sweep(req.sweep)[0], outcome.documents)
    if req.scaling and outcome.documents:
        outcome.scaling = scaling_rows(outcome.documents)
    if result.recorder is not None:
        result.recorder.attach("train_summary", {"points": outcome.documents, "sweep": outcome.sweep,
                                                 "scaling": outcome.scaling, "note": note})
    return outcome
