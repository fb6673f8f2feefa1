"""`bench moe` beside its prediction: the measured dispatch and combine, in DeepEP's bandwidth convention, and what
the model says about the same shape.

Which prediction: `--system S` (or the probed System on GPU ranks) times an all-to-allv of the same routing
(`predict moe --kernel nccl`, a token once per distinct destination rank, with the measured imbalance) on S's
tiers; `--system profile:NAME` of a profile fitted on CPU ranks times it with the profile's all_to_all fit at the
size nccl-tests would call it (the busiest rank's bytes). CPU ranks without such a profile get no prediction.

The document (`--json`, and `extra["moe_summary"]` of the stored run): `dispatch_us` and `combine_us` (median over
the timed iterations of the slowest rank's time), their min/max, `dispatch_gb_per_s` and `combine_gb_per_s`
(DeepEP's convention: `model.comm.moe.convention_bytes` over the time), `dispatch_bytes_per_rank` and
`combine_bytes_per_rank` (the bytes the convention counts), `ranks_per_token`, `nodes_per_token`, `imbalance`,
`rows_sent`/`rows_received` per rank, `ran_over` (what torch.distributed ran: backend and transport, ran_over),
`predicted` (or None) with `dispatch_us`, `combine_us`, bandwidths in the
same convention and `source`, `error_pct` for both (None where the prediction is not for the ranks measured: a GPU
System beside CPU ranks), and `note`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from linkscope.bench.comm import resolve_backend
from linkscope.bench.layout import torchrun_env
from linkscope.bench.moe.config import MoeConfig
from linkscope.bench.moe.routing import load_imbalance
from linkscope.bench.moe.runner import Emit, MoeRunResult, resolve_config, run_moe_bench
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import system_from_dict
from linkscope.model.calibration.systems import ResolvedSystem, resolve
from linkscope.model.comm.moe import MoeRequest, convention_bytes, convention_gb_per_s, predict_moe

NO_CPU_MODEL = ("no prediction: CPU ranks are measured and calibrated, never modelled; calibrate an all_to_all sweep "
                "of this host (`linkscope bench all_to_all`, then `linkscope calibrate RUN_ID`) and pass "
                "--system profile:NAME")
FIT_OP = "all_to_all"


@dataclass
class MoeOutcome:
    """The run and what was made of it."""

    result: MoeRunResult
    document: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def _resolved(system_spec: str | None, backend: str) -> ResolvedSystem | None:
    """`--system`, or the probed GPU System on nccl ranks; None where nothing can be predicted."""
    db = load_db()
    if system_spec:
        resolved = resolve(system_spec, db)
        if resolved.found_tiers is None and resolved.profile is not None:
            resolved.profile.fit(FIT_OP)  # refuse before any rank starts: the profile must have the fit
        return resolved
    if backend != "nccl":
        return None
    from linkscope.bench.runinfo import probed_system

    probed = probed_system()
    if probed and probed.get("gpu") not in (None, "CPU"):
        return ResolvedSystem.plain(system_from_dict(probed, db.gpu))
    return None


def run_moe_check(cfg: MoeConfig, system_spec: str | None = None, emit: Emit | None = None) -> MoeOutcome:
    """Check the shape and `--system`, measure, then set the measurement beside the prediction and store both."""
    env = torchrun_env()
    resolved_cfg = resolve_config(cfg, env.world if env else None)
    resolved = _resolved(system_spec, resolve_backend(resolved_cfg.run.backend))
    result = run_moe_bench(resolved_cfg, emit)
    outcome = MoeOutcome(result)
    recorder = result.recorder
    if recorder is None or not recorder.timings.get("dispatch_s"):
        return outcome  # a torchrun rank other than 0, or a run that ended before timing
    outcome.document = document(resolved_cfg, recorder.routing, recorder.timings, resolved, result.run_id,
                                recorder.info.backend, recorder.info.nccl_env)
    recorder.attach("moe_summary", outcome.document)
    return outcome


def _us(seconds: list[float]) -> dict[str, float]:
    values = [s * 1e6 for s in seconds]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def ran_over(backend: str, nodes: int, nccl_env: dict[str, str] | None = None) -> str:
    """What torch.distributed's all_to_all_single ran over, as far as the backend and NCCL's environment tell:
    gloo's TCP sockets, NCCL inside one node, or NCCL's network transport (sockets where IB is disabled, the
    network plugin or IB otherwise; NCCL_DEBUG=INFO's NET/ lines and `linkscope nccl-log` say which for sure)."""
    env = nccl_env or {}
    if backend != "nccl":
        return f"{backend}: TCP sockets through the host, no GPU transport (a host proxy's cost, not a GPU kernel's)"
    if nodes == 1:
        return "nccl inside one node: P2P over NVLink/PCIe or shared memory, as NCCL picks (NCCL_P2P_DISABLE=" \
               f"{env.get('NCCL_P2P_DISABLE', 'unset')})"
    if env.get("NCCL_NET", "").lower() == "socket" or env.get("NCCL_IB_DISABLE") == "1":
        return "nccl across nodes over sockets (NCCL_NET=Socket or NCCL_IB_DISABLE=1): its proxy thread, no RDMA"
    plugin = env.get("NCCL_NET_PLUGIN") or env.get("NCCL_NET") or "IB verbs or the network plugin NCCL found"
    return f"nccl across nodes through its net proxy thread over {plugin} (transport proxy or efa in predict moe)"


def document(cfg: MoeConfig, routing: dict[str, Any], timings: dict[str, Any], resolved: ResolvedSystem | None,
             run_id: str, backend: str, nccl_env: dict[str, str] | None = None) -> dict[str, Any]:
    """The measured figures in DeepEP's convention beside the prediction for the same shape."""
    counts = routing["counts"]
    world = len(counts)
    per_node = int(routing.get("ranks_per_node") or world)
    nodes = -(-world // per_node)
    sent = [sum(row) for row in counts]
    received = [sum(row[d] for row in counts) for d in range(world)]
    imbalance = load_imbalance(counts)
    rpt, npt = float(routing["ranks_per_token"]), float(routing["nodes_per_token"])
    dispatch, combine = _us(timings["dispatch_s"]), _us(timings["combine_s"])
    d_bytes = convention_bytes(cfg.tokens_per_rank, cfg.dispatch_bytes, rpt, npt, nodes)
    c_bytes = convention_bytes(cfg.tokens_per_rank, cfg.combine_bytes, rpt, npt, nodes)
    doc: dict[str, Any] = {
        "run_id": run_id, "backend": backend, "ranks": world, "nodes": nodes,
        "ran_over": ran_over(backend, nodes, nccl_env),
        "shape": {"tokens_per_rank": cfg.tokens_per_rank, "hidden": cfg.hidden, "topk": cfg.topk,
                  "experts": cfg.experts, "skew": cfg.skew, "precision": cfg.precision, "seed": cfg.seed},
        "iters": len(timings["dispatch_s"]),
        "dispatch_us": dispatch["median"], "combine_us": combine["median"],
        "dispatch_us_min": dispatch["min"], "dispatch_us_max": dispatch["max"],
        "combine_us_min": combine["min"], "combine_us_max": combine["max"],
        "dispatch_gb_per_s": convention_gb_per_s(d_bytes, dispatch["median"]),
        "combine_gb_per_s": convention_gb_per_s(c_bytes, combine["median"]),
        "dispatch_bytes_per_rank": d_bytes, "combine_bytes_per_rank": c_bytes,
        "token_bytes": {"dispatch": cfg.dispatch_bytes, "combine": cfg.combine_bytes},
        "ranks_per_token": rpt, "nodes_per_token": npt, "imbalance": imbalance,
        "rows_sent": sent, "rows_received": received,
    }
    predicted, note = _predict(cfg, doc, resolved, per_node, backend)
    doc["predicted"] = predicted
    # A GPU System's prediction beside CPU ranks' times is shown for scale, but an error between them means nothing.
    doc["error_pct"] = None if predicted is None or note else {
        k: 100.0 * (doc[f"{k}_us"] - predicted[f"{k}_us"]) / predicted[f"{k}_us"] for k in ("dispatch", "combine")}
    doc["note"] = note
    return doc


def _predict(cfg: MoeConfig, doc: dict[str, Any], resolved: ResolvedSystem | None, per_node: int,
             backend: str) -> tuple[dict[str, Any] | None, str]:
    if resolved is None:
        return None, NO_CPU_MODEL
    if resolved.found_tiers is None and resolved.profile is not None:
        fit = resolved.profile.fit(FIT_OP)
        hottest_bytes = [max(max(doc["rows_sent"]), max(doc["rows_received"])) * b
                         for b in (cfg.dispatch_bytes, cfg.combine_bytes)]
        d_us, c_us = (float(v) for v in fit.predict_us(hottest_bytes, doc["ranks"]))
        source = f"profile {resolved.profile.name} ({FIT_OP} fit at the busiest rank's bytes)"
        return _prediction(doc, d_us, c_us, source), ""
    req = MoeRequest(ep=doc["ranks"], tokens_per_rank=cfg.tokens_per_rank, hidden=cfg.hidden, topk=cfg.topk,
                     experts=cfg.experts, precision=cfg.precision, kernel="nccl",
                     imbalance=max(1.0, doc["imbalance"]), one_copy_per_rank=True)
    try:
        p = predict_moe(resolved.tiers, req, per_node)
    except UserError as exc:
        return None, f"no prediction on {resolved.spec}: {exc}"
    name = resolved.profile_name and f"profile {resolved.profile_name}" or f"system {resolved.system.id}"
    note = "" if backend == "nccl" else (f"the prediction is for {resolved.system.id}'s GPUs, not for this host's "
                                         f"{backend} CPU ranks")
    return _prediction(doc, p.dispatch_us, p.combine_us, f"{name} (all-to-allv through NCCL over {p.transport})"), note


def _prediction(doc: dict[str, Any], dispatch_us: float, combine_us: float, source: str) -> dict[str, Any]:
    return {"dispatch_us": dispatch_us, "combine_us": combine_us, "source": source,
            "dispatch_gb_per_s": convention_gb_per_s(doc["dispatch_bytes_per_rank"], dispatch_us),
            "combine_gb_per_s": convention_gb_per_s(doc["combine_bytes_per_rank"], combine_us)}
