"""`bench kv` beside the model: each point's measured transfer (median of the slowest rank's time), its GB/s and
latency, and the disaggregated serving model's figure for the same pages.

Which figure: `--system profile:NAME` with a KV fit (`calibrate` of a `bench kv` run) predicts with the fitted link;
a GPU System (`--system S`, or the probed one on nccl ranks) prices the pages on the path the ranks take (the
scale-up link inside a node, RDMA or TCP across nodes) exactly as `predict infer --disaggregated` does, without the
per-request control round trip `bench kv` does not make. CPU ranks without such a profile get no figure.

The document (`--json`, and `extra["kv_summary"]` of the stored run): `points`, each with `block_tokens`,
`in_flight`, `messages_per_pair`, `page_bytes`, `bytes_per_pair`, `time_us` (median) with `time_us_min/max`,
`gb_per_s` (bytes per pair over the median time), `predicted` ({time_us, gb_per_s} or None) and `error_pct`
(None where the figure is not for the ranks measured); with `source` and `note` for the run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from linkscope.bench.comm import resolve_backend
from linkscope.bench.kv.config import KvConfig
from linkscope.bench.kv.runner import KvRunResult, resolve_config, run_kv_bench
from linkscope.bench.layout import torchrun_env
from linkscope.bench.recorded import Emit
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import system_from_dict
from linkscope.model.calibration.kv_fit import KvFit
from linkscope.model.calibration.systems import ResolvedSystem, resolve
from linkscope.model.step.kv_transfer import link, scale_up_path, stream_s

NO_CPU_MODEL = ("no model figure: CPU ranks are measured and calibrated, never modelled; calibrate this run "
                "(`linkscope calibrate RUN_ID`) and pass --system profile:NAME")


@dataclass
class KvOutcome:
    """The run and what was made of it."""

    result: KvRunResult
    document: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def _resolved(system_spec: str | None, backend: str) -> ResolvedSystem | None:
    """`--system`, or the probed GPU System on nccl ranks; None where nothing can be predicted."""
    db = load_db()
    if system_spec:
        resolved = resolve(system_spec, db)
        if resolved.found_tiers is None and resolved.profile is not None and resolved.profile.kv is None:
            raise UserError(f"profile '{resolved.profile.name}' has no KV fit; calibrate a `bench kv` run",
                            field="system")
        return resolved
    if backend != "nccl":
        return None
    from linkscope.bench.runinfo import probed_system

    probed = probed_system()
    if probed and probed.get("gpu") not in (None, "CPU"):
        return ResolvedSystem.plain(system_from_dict(probed, db.gpu))
    return None


def run_kv_check(cfg: KvConfig, system_spec: str | None = None, emit: Emit | None = None) -> KvOutcome:
    """Check the pages and `--system`, measure, then set every point beside the model and store both."""
    env = torchrun_env()
    resolved_cfg = resolve_config(cfg, env.world if env else None)
    resolved = _resolved(system_spec, resolve_backend(resolved_cfg.run.backend))
    result = run_kv_bench(resolved_cfg, emit)
    outcome = KvOutcome(result)
    recorder = result.recorder
    if recorder is None or not recorder.points:
        return outcome  # a torchrun rank other than 0, or a run that ended before its first point
    outcome.document = document(resolved_cfg, recorder.points, resolved, result.run_id, recorder.info.backend,
                                recorder.info.nodes or 1)
    recorder.attach("kv_summary", outcome.document)
    return outcome


Predict = Callable[[float, float], float]


def _predictor(resolved: ResolvedSystem | None, nodes: int, backend: str) -> tuple[Predict | None, str, str]:
    """(seconds(messages, bytes), source, note), or (None, "", why not)."""
    if resolved is None:
        return None, "", NO_CPU_MODEL
    if resolved.found_tiers is None and resolved.profile is not None and resolved.profile.kv is not None:
        fit = KvFit.from_dict(resolved.profile.kv, f"profile '{resolved.profile.name}'")
        return fit.predict_s, f"profile {resolved.profile.name} (KV fit)", ""
    system = resolved.system
    network = system.node.scale_out
    path = scale_up_path(system) if nodes <= 1 else "rdma" if network.is_rdma else "tcp"
    try:
        link_ = link(system, resolved.tiers, path)
    except UserError as exc:
        return None, "", f"no model figure on {resolved.spec}: {exc}"
    note = "" if backend == "nccl" else (f"the figure is for {system.id}'s GPUs over {path}, not for this host's "
                                         f"{backend} CPU ranks")
    return (lambda m, b: stream_s(link_, m, b)), f"system {system.id} over {path}", note


def document(cfg: KvConfig, points: list[dict[str, Any]], resolved: ResolvedSystem | None, run_id: str,
             backend: str, nodes: int) -> dict[str, Any]:
    """Every point measured, its GB/s and latency, beside the model's figure."""
    predict, source, note = _predictor(resolved, nodes, backend)
    rows = []
    for p in points:
        times_us = [s * 1e6 for s in p["seconds"]]
        median = statistics.median(times_us)
        row = {k: p[k] for k in ("block_tokens", "in_flight", "messages_per_pair", "page_bytes", "bytes_per_pair")}
        row.update(time_us=median, time_us_min=min(times_us), time_us_max=max(times_us),
                   gb_per_s=p["bytes_per_pair"] / (median * 1e3), wrong_pages=p["wrong_pages"])
        predicted = None
        if predict is not None:
            t_us = predict(p["messages_per_pair"], p["bytes_per_pair"]) * 1e6
            predicted = {"time_us": t_us, "gb_per_s": p["bytes_per_pair"] / (t_us * 1e3)}
        row["predicted"] = predicted
        row["error_pct"] = None if predicted is None or note else 100.0 * (median / predicted["time_us"] - 1.0)
        rows.append(row)
    return {"run_id": run_id, "backend": backend, "pairs": (cfg.run.nproc or 2) // 2, "nodes": nodes,
            "model": cfg.model,
            "geometry": {"layers": cfg.layers, "kv_heads": cfg.kv_heads, "head_dim": cfg.head_dim,
                         "tokens": cfg.tokens, "granularity": cfg.granularity, "kv_precision": cfg.kv_precision},
            "iters": cfg.iters, "points": rows, "source": source, "note": note}
