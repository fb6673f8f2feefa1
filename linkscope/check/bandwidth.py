"""The bus-bandwidth verdict of one collective: against the model's prediction x --pass-pct and, where a provider
publishes one, against its health-check floor; never PASS below the size where the bandwidth plateaus.

A node below the higher of the two limits FAILs (an advisory floor WARNs), and the item names the limit that
failed it and shows both, so `check` is at least as strict as the provider's own health check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from linkscope.check.items import CheckItem, Status, Thresholds
from linkscope.hardware.floors import HealthFloor
from linkscope.results.records import CollectiveRow


def size_label(nbytes: int) -> str:
    """`16 GiB`, `1 MiB`, `8 B`: sizes as people read them in a verdict line."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


@dataclass(frozen=True)
class BandwidthContext:
    """What a bandwidth item is judged against, beyond the prediction: the plateau and the published floors."""

    system_id: str = ""
    plateau_bytes: dict[str, int] = field(default_factory=dict)
    """Per op, the size from which the expected System's busbw is on its plateau (missing: unknown)."""
    floors: dict[str, HealthFloor] = field(default_factory=dict)
    """Per op, the floor published for this System, GPU count and node count."""
    not_comparable: str = ""
    """Why the measurement cannot be judged against the model at all (gloo on CPU against a GPU System)."""
    rerun_hint: str = "run --full"


def placement_mean(rows: list[CollectiveRow], size: int) -> float:
    """The mean busbw of the rows at one size, out-of-place and in-place together (nccl-tests' footer statistic
    for a one-size run, and the statistic of Azure's check)."""
    return fmean(r.busbw for r in rows if r.size_bytes == size)


def _floor_figure(rows: list[CollectiveRow], floor: HealthFloor, judged: int) -> tuple[float, int] | None:
    """The measurement in the floor's own statistic, and the size it was taken at; None when the run has no row
    the floor's statistic could use."""
    if floor.statistic == "max":
        usable = [r for r in rows if r.size_bytes <= floor.size_bytes]
        if not usable:
            return None
        best = max(usable, key=lambda r: r.busbw)
        return best.busbw, best.size_bytes
    size = floor.size_bytes if any(r.size_bytes == floor.size_bytes for r in rows) else judged
    return placement_mean(rows, size), size


def busbw_item(op: str, rows: list[CollectiveRow], pred: dict[int, Any] | None, reason: str,
               thresholds: Thresholds, source: str, ctx: BandwidthContext) -> CheckItem:
    """One op's bandwidth line. `rows` are the op's rows of positive size; `pred[size]` the model's prediction."""
    floor = ctx.floors.get(op)
    sizes = sorted({r.size_bytes for r in rows})
    judged = floor.size_bytes if floor and floor.statistic == "avg" and floor.size_bytes in sizes else sizes[-1]
    measured = placement_mean(rows, judged)
    name = f"{op}.busbw@{judged}B"
    if ctx.not_comparable:
        return CheckItem(name, "SKIP", round(measured, 3), None, "GB/s", source, ctx.not_comparable)
    plateau = ctx.plateau_bytes.get(op)
    below_plateau = plateau is not None and judged < plateau
    want = float(pred[judged].busbw) if pred else None
    if want is None and floor is None:
        return CheckItem(name, "SKIP", round(measured, 3), None, "GB/s", source, reason)
    limits: dict[str, Any] = {"judged_bytes": judged, "statistic": "mean of out-of-place and in-place",
                              "plateau_bytes": plateau}
    status, why, expected = _model_verdict(measured, want, thresholds, limits, reason)
    notes = [f"model {want:.1f} GB/s x {thresholds.pass_pct:g}% = {want * thresholds.pass_pct / 100:.1f} GB/s"
             if want else "no model prediction"]
    if floor is not None and not below_plateau:
        status, why, expected = _floor_verdict(rows, floor, judged, status, why, expected, limits, measured, want,
                                               thresholds)
        judged_at = limits.get("floor_judged_bytes")
        at = "" if judged_at in (None, floor.size_bytes) else \
            f", judged at {size_label(judged_at)}, the largest size measured"
        notes.append(f"{floor.describe()}{at} ({floor.source})")
    elif floor is not None:
        notes.append(f"{floor.describe()}: not judged below the plateau")
    else:
        notes.append(f"no published health-check floor for {ctx.system_id or 'this System'}")
    if below_plateau and plateau is not None:
        limits["below_plateau"] = True
        if status in ("PASS", "SKIP"):
            status = "WARN"
        why = (f"not measured at the plateau ({size_label(plateau)} and up for this System; the largest size "
               f"measured is {size_label(judged)}); {ctx.rerun_hint}" + (f". {why}" if why else ""))
    if status == "SKIP" and not why:
        why = reason
    return CheckItem(name, status, round(measured, 3), expected, "GB/s", f"{source}; " + "; ".join(notes), why,
                     limits=limits)


def _model_verdict(measured: float, want: float | None, thresholds: Thresholds, limits: dict[str, Any],
                   reason: str) -> tuple[Status, str, float | None]:
    if not want:
        return "SKIP", reason, None
    pct = measured / want * 100.0
    limits.update(model_gb_per_s=round(want, 3), model_pass_gb_per_s=round(want * thresholds.pass_pct / 100, 3))
    status = thresholds.status(pct)
    if status != "PASS":
        limits["failed_by"] = "model"
    why = "" if status == "PASS" else (
        f"{pct:.0f}% of the model's prediction: see the transport line (SHM/socket fallback?), NCCL_* overrides, "
        "other jobs on the GPUs")
    return status, why, round(want, 3)


def _floor_verdict(rows: list[CollectiveRow], floor: HealthFloor, judged: int, status: Status, why: str,
                   expected: float | None, limits: dict[str, Any], measured: float, want: float | None,
                   thresholds: Thresholds) -> tuple[Status, str, float | None]:
    """FAIL below the higher of the floor and model x pass% (WARN for an advisory floor); name which one."""
    figure = _floor_figure(rows, floor, judged)
    limits.update(floor_gb_per_s=floor.busbw_gb_per_s, floor_statistic=floor.statistic,
                  floor_size_bytes=floor.size_bytes, floor_source=floor.url or floor.source)
    if figure is None:
        return status, why, expected
    value, at = figure
    limits.update(floor_measured_gb_per_s=round(value, 3), floor_judged_bytes=at)
    at_note = "" if at == floor.size_bytes else f" (the floor is set at {size_label(floor.size_bytes)}; judged at " \
                                                f"{size_label(at)}, the largest size measured)"
    model_pass = want * thresholds.pass_pct / 100 if want else 0.0
    if value < floor.busbw_gb_per_s:
        limits["failed_by"] = "floor"
        verdict: Status = "WARN" if floor.severity == "warn" else "FAIL"
        text = (f"{value:.1f} GB/s is below {floor.describe()}{at_note}; model x {thresholds.pass_pct:g}% "
                f"= {model_pass:.1f} GB/s. The provider's own check takes this node out of service: check NVLink "
                "and NIC errors, other jobs on the GPUs, then ask for a replacement")
        return (verdict if status != "FAIL" else "FAIL"), text, expected
    if floor.severity == "fail" and status == "WARN" and want is not None and measured < model_pass:
        # Above the floor but below model x pass%: the higher of the two limits is the model's.
        limits["failed_by"] = "model"
        return "FAIL", f"{why}; above {floor.describe()}{at_note} but below model x {thresholds.pass_pct:g}% " \
                       f"= {model_pass:.1f} GB/s", expected
    return status, why, expected
