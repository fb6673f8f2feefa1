"""Filtering and sorting the offering catalog: the typed answer to "who has NVLink and InfiniBand, at what price"."""

from __future__ import annotations

import math

from dataclasses import dataclass
from collections.abc import Callable, Iterable

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.hardware.system import FABRICS


@dataclass(frozen=True)
class OfferingFilter:
    """Every catalog filter; None or False means "don't filter on this"."""

    gpu: str | None = None
    min_gpus: int | None = None
    nvlink: bool = False
    nvswitch: bool = False
    ib: bool = False
    rdma: bool = False
    fabric: str | None = None
    min_scale_out_gbit: float | None = None
    provider: str | None = None
    max_price_per_gpu_hour: float | None = None
    multi_node: bool = False


def _predicates(f: OfferingFilter, db: HardwareDB) -> list[Callable[[Offering], bool]]:
    checks: list[Callable[[Offering], bool]] = []
    if f.gpu:
        wanted = {g.id for g in db.gpus_matching(f.gpu)}
        checks.append(lambda o: o.system.node.gpu.id in wanted)
    if f.min_gpus:
        checks.append(lambda o: o.system.node.gpus >= (f.min_gpus or 0))
    if f.nvlink:
        checks.append(lambda o: o.system.node.scale_up.is_nvlink)
    if f.nvswitch:
        checks.append(lambda o: o.system.node.scale_up.kind == "nvswitch")
    if f.ib:
        checks.append(lambda o: o.system.node.scale_out.fabric == "infiniband")
    if f.rdma:
        checks.append(lambda o: o.system.node.scale_out.is_rdma)
    if f.fabric:
        checks.append(lambda o: o.system.node.scale_out.fabric == f.fabric)
    if f.min_scale_out_gbit is not None:
        checks.append(lambda o: (o.system.node.scale_out.total_gbit_per_s or 0.0) >= (f.min_scale_out_gbit or 0.0))
    if f.provider:
        providers = {p.strip().lower() for p in f.provider.split(",")}
        checks.append(lambda o: o.provider.lower() in providers)
    if f.max_price_per_gpu_hour is not None:
        limit = f.max_price_per_gpu_hour
        checks.append(lambda o: o.price_per_gpu_hour is not None and o.price_per_gpu_hour <= limit)
    if f.multi_node:
        checks.append(lambda o: o.multi_node is True)
    return checks


def validate_filter(f: OfferingFilter, db: HardwareDB) -> None:
    """Reject filter values that can never match, naming the flag, instead of silently returning nothing."""
    if f.fabric is not None and f.fabric not in FABRICS:
        raise UserError(f"unknown fabric '{f.fabric}' (choose from {', '.join(FABRICS)})", field="fabric")
    if f.gpu is not None and not db.gpus_matching(f.gpu):
        raise UserError(f"unknown GPU '{f.gpu}' (families: {', '.join(db.family_names())}; or one GPU by id: "
                        f"{', '.join(db.gpu_names())})", field="gpu")
    if f.provider:
        known = {o.provider.lower() for o in db.offerings.values()}
        unknown = sorted({p.strip().lower() for p in f.provider.split(",")} - known)
        if unknown:
            raise UserError(f"unknown provider '{unknown[0]}' (known: {', '.join(sorted(known))})", field="provider")
    for flag, value in (("--min-gpus", f.min_gpus), ("--min-scale-out-gbit", f.min_scale_out_gbit),
                        ("--max-price-per-gpu-hour", f.max_price_per_gpu_hour)):
        if value is not None and value < 0:
            raise UserError(f"{flag}: must not be negative (got {value})")
        if value is not None and not math.isfinite(value):
            raise UserError(f"{flag}: must be a finite number (got {value})")


def filter_offerings(offerings: Iterable[Offering], f: OfferingFilter, db: HardwareDB) -> list[Offering]:
    """The offerings that pass every filter, in input order."""
    validate_filter(f, db)
    checks = _predicates(f, db)
    return [o for o in offerings if all(check(o) for check in checks)]


# Sort keys: unknown values (None) always sort last, whatever the direction.
SORT_KEYS: dict[str, tuple[Callable[[Offering], float | str | None], bool]] = {
    "price": (lambda o: o.price_per_hour, False),
    "price-per-gpu": (lambda o: o.price_per_gpu_hour, False),
    "scale-out": (lambda o: o.system.node.scale_out.total_gbit_per_s, True),
    "scale-out-per-gpu": (lambda o: o.system.node.scale_out_gb_per_s_per_gpu(), True),
    "scale-up": (lambda o: o.system.node.scale_up.bw_gb_per_s, True),
    "gpus": (lambda o: o.system.node.gpus, True),
    "memory": (lambda o: o.system.node.gpu.memory_gib * o.system.node.gpus, True),
    "tflops": (lambda o: o.system.node.gpu.dense_tflops("bf16") * o.system.node.gpus, True),
    "provider": (lambda o: o.provider, False),
    "gpu": (lambda o: o.system.node.gpu.id, False),
    "id": (lambda o: o.id, False),
}


def sort_offerings(offerings: list[Offering], key: str) -> list[Offering]:
    """Sort by one of SORT_KEYS (prices ascending, bandwidths and sizes descending), unknowns last."""
    if key not in SORT_KEYS:
        raise UserError(f"unknown key '{key}' (choose from {', '.join(SORT_KEYS)})", field="sort")
    get, descending = SORT_KEYS[key]
    known = [o for o in offerings if get(o) is not None]
    unknown = [o for o in offerings if get(o) is None]
    known.sort(key=lambda o: (get(o), o.id), reverse=descending)
    return known + sorted(unknown, key=lambda o: o.id)
