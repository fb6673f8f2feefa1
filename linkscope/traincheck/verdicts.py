"""Comparing points: which `--sweep` setting wins (only among those that still train), and `--scaling` efficiency."""

from __future__ import annotations

from typing import Any

LOSS_DROP_SHARE = 0.5
"""A setting trains "like the baseline" when its loss fell by at least this share of the baseline's fall."""


def _loss_drop(doc: dict[str, Any]) -> float | None:
    loss = doc.get("loss") or {}
    if loss.get("first") is None or loss.get("last") is None:
        return None
    return float(loss["first"]) - float(loss["last"])


def _baseline(key: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    if key == "grad-compression":
        for doc in docs:
            if doc["parallelism"]["grad_compression"] == "none":
                return doc
    return docs[0]


def trains_like(doc: dict[str, Any], baseline: dict[str, Any]) -> bool:
    """Whether the loss still decreases like the baseline's."""
    drop, base = _loss_drop(doc), _loss_drop(baseline)
    if drop is None or base is None:
        return False
    return drop > 0 and drop >= LOSS_DROP_SHARE * base


def sweep_verdict(key: str, docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each setting's step time against the baseline's, and the fastest setting that still trains."""
    base = _baseline(key, docs)
    rows = []
    for doc in docs:
        step = doc.get("step_time_s")
        speedup = base["step_time_s"] / step if step and base.get("step_time_s") else None
        rows.append({"setting": doc["label"], "step_time_s": step, "speedup": speedup,
                     "loss_drop": _loss_drop(doc), "trains": trains_like(doc, base)})
    ok = [r for r in rows if r["trains"] and r["step_time_s"]]
    winner = min(ok, key=lambda r: r["step_time_s"]) if ok else None
    broken = [r["setting"] for r in rows if not r["trains"]]
    best = next((d for d in docs if winner and d["label"] == winner["setting"]), None)
    return {"key": key, "baseline": base["label"], "rows": rows, "winner": winner["setting"] if winner else None,
            "speedup": winner["speedup"] if winner else None, "not_training": broken,
            "significant": bool(best is not None and best is not base and base.get("step_time_s")
                                and beyond_noise(best, base))}


def _standard_error_s(doc: dict[str, Any]) -> float:
    steps = (doc.get("steps") or {}).get("steps") or 1
    return float(doc.get("step_time_s_stdev") or 0.0) / steps ** 0.5


def beyond_noise(doc: dict[str, Any], base: dict[str, Any]) -> bool:
    """Whether two mean step times differ by more than twice the standard error of their difference."""
    diff = abs(doc["step_time_s"] - base["step_time_s"])
    return diff > 2.0 * (_standard_error_s(doc) ** 2 + _standard_error_s(base) ** 2) ** 0.5


def scaling_rows(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Speedup in tokens/s and efficiency against the smallest rank count (same per-rank work), measured and
    predicted."""
    first = docs[0]
    out = []
    for doc in docs:
        factor = doc["ranks"] / first["ranks"]
        speedup = _ratio(doc.get("tokens_per_s"), first.get("tokens_per_s"))
        predicted = _predicted_speedup(doc, first)
        out.append({"ranks": doc["ranks"], "step_time_s": doc.get("step_time_s"),
                    "tokens_per_s": doc.get("tokens_per_s"), "speedup": speedup,
                    "efficiency": speedup / factor if speedup is not None else None,
                    "predicted_speedup": predicted,
                    "predicted_efficiency": predicted / factor if predicted is not None else None})
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _predicted_speedup(doc: dict[str, Any], first: dict[str, Any]) -> float | None:
    p, q = doc.get("predicted"), first.get("predicted")
    if not p or not q:
        return None
    # Same work per rank: tokens/s grows with the rank count and shrinks with the step time.
    return (doc["ranks"] / first["ranks"]) * q["step_time_s"] / p["step_time_s"]
