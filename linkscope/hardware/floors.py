"""Published health-check floors (data/health_floors.yaml): the bus bandwidth below which a provider's own node
health check fails a node, per System, collective, GPU count and test size.

    floors = load_floors(load_db())
    floor = floors.find("azure/Standard_ND96isr_H100_v5", "all_reduce", gpus=8, nodes=1)

Thresholds for `linkscope check` only: nothing here is read by the model (DESIGN.md, held-out validation).
A malformed file is a DataError naming the entry: a negative, non-finite or unit-less value, an unknown System id,
a duplicate entry.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal, cast

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import DATA_DIR, HardwareDB, read_yaml
from linkscope.hardware.schema import past_date

FLOORS_FILE = DATA_DIR / "health_floors.yaml"
Statistic = Literal["avg", "max"]
Severity = Literal["fail", "warn"]
_FIELDS = {"system", "collective", "gpus", "min_nodes", "size_bytes", "statistic", "busbw_gb_per_s", "severity",
           "library", "test", "source", "url", "as_of"}
_REQUIRED = ("system", "collective", "gpus", "size_bytes", "statistic", "busbw_gb_per_s", "source", "as_of")
_UNITLESS = {"busbw", "value", "floor", "threshold", "bandwidth", "min_busbw", "size"}
"""Keys that would hold a number without naming its unit: refused with a pointer to the unit-suffixed name."""
_PROVIDER_NAMES = {"azure": "Azure", "aws": "AWS", "gcp": "GCP", "oci": "OCI"}
_COLLECTIVES = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "sendrecv"}


@dataclass(frozen=True)
class HealthFloor:
    """One published floor: FAIL (or, advisory, WARN) below `busbw_gb_per_s` at `size_bytes` by `statistic`."""

    system: str
    collective: str
    gpus: int
    size_bytes: int
    statistic: Statistic
    busbw_gb_per_s: float
    source: str
    as_of: date
    min_nodes: int = 1
    severity: Severity = "fail"
    library: str = "nccl"
    test: str = ""
    url: str = ""

    @property
    def provider(self) -> str:
        """Who publishes it, from the System id (`azure/...` -> azure); `preset` for a preset's floor."""
        name = self.system.split("/", 1)[0] if "/" in self.system else "preset"
        return _PROVIDER_NAMES.get(name, name)

    def describe(self) -> str:
        """`azure health-check floor 460 GB/s (avg busbw at 16 GiB)`, for verdict lines."""
        kind = "advisory health-check floor" if self.severity == "warn" else "health-check floor"
        return (f"{self.provider}'s {kind} {self.busbw_gb_per_s:g} GB/s ({self.statistic} busbw at "
                f"{_size(self.size_bytes)})")


def _size(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


@dataclass(frozen=True)
class HealthFloors:
    """Every floor, looked up by System, collective, GPUs per node and node count."""

    floors: tuple[HealthFloor, ...] = ()

    def find(self, system_id: str, collective: str, gpus: int, nodes: int = 1) -> HealthFloor | None:
        """The floor for this test on this System: the same collective and GPUs per node, run on at least the
        floor's node count (a one-node floor applies to one node only)."""
        for floor in self.floors:
            if (floor.system, floor.collective, floor.gpus) != (system_id, collective, gpus):
                continue
            if (floor.min_nodes == 1 and nodes == 1) or (floor.min_nodes > 1 and nodes >= floor.min_nodes):
                return floor
        return None

    def for_system(self, system_id: str) -> list[HealthFloor]:
        """Every floor published for one System."""
        return [f for f in self.floors if f.system == system_id]


def load_floors(db: HardwareDB, path: Path = FLOORS_FILE) -> HealthFloors:
    """Read and validate a floors file against the known Systems (offerings and presets)."""
    file = str(path)
    doc = read_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("floors"), list):
        raise DataError(file, "expected a mapping with a 'floors' list")
    known = set(db.systems) | set(db.offerings)
    floors: list[HealthFloor] = []
    seen: dict[tuple[str, str, int, int], str] = {}
    for index, raw in enumerate(doc["floors"]):
        label = str(raw["system"]) if isinstance(raw, dict) and isinstance(raw.get("system"), str) else \
            f"#{index + 1}"
        floor = _floor(raw, file, label, known)
        key = (floor.system, floor.collective, floor.gpus, floor.min_nodes)
        if key in seen:
            raise DataError(file, f"duplicate entry: {floor.collective} on {floor.gpus} GPUs x {floor.min_nodes} "
                                  f"node(s) is already given as {seen[key]}", entry=label)
        seen[key] = f"entry #{index + 1}"
        floors.append(floor)
    return HealthFloors(tuple(floors))


def _floor(raw: Any, file: str, label: str, known: set[str]) -> HealthFloor:
    if not isinstance(raw, dict):
        raise DataError(file, "an entry must be a mapping", entry=label)
    for key in raw:
        if key in _UNITLESS:
            raise DataError(file, f"unit-less value '{key}': name the unit (busbw_gb_per_s, size_bytes)",
                            entry=label, field=str(key))
        if key not in _FIELDS:
            raise DataError(file, "unknown field", entry=label, field=str(key))
    for key in _REQUIRED:
        if key not in raw:
            raise DataError(file, "missing", entry=label, field=key)
    system = _text(raw, "system", file, label)
    if system not in known:
        close = difflib.get_close_matches(system, sorted(known), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise DataError(file, f"unknown System id '{system}'{hint}", entry=label, field="system")
    return HealthFloor(
        system=system, collective=_choice(raw, "collective", _COLLECTIVES, file, label),
        gpus=_count(raw, "gpus", file, label), min_nodes=_count(raw.get("min_nodes", 1), "min_nodes", file, label),
        size_bytes=_count(raw, "size_bytes", file, label),
        statistic=cast(Statistic, _choice(raw, "statistic", {"avg", "max"}, file, label)),
        busbw_gb_per_s=_positive(raw, "busbw_gb_per_s", file, label),
        severity=cast(Severity, _choice({"severity": raw.get("severity", "fail")}, "severity", {"fail", "warn"},
                                        file, label)),
        library=str(raw.get("library", "nccl")), test=str(raw.get("test", "")), url=str(raw.get("url", "")),
        source=_text(raw, "source", file, label), as_of=_date(raw, file, label))


def _text(raw: dict[str, Any], key: str, file: str, label: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value.strip():
        raise DataError(file, f"must be a non-empty text, got {value!r}", entry=label, field=key)
    return value.strip()


def _choice(raw: dict[str, Any], key: str, allowed: set[str], file: str, label: str) -> str:
    value = raw[key]
    if value not in allowed:
        raise DataError(file, f"must be one of {', '.join(sorted(allowed))}, got {value!r}", entry=label, field=key)
    return str(value)


def _count(raw: Any, key: str, file: str, label: str) -> int:
    value = raw[key] if isinstance(raw, dict) else raw
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(file, f"must be a whole number of at least 1, got {value!r}", entry=label, field=key)
    return value


def _positive(raw: dict[str, Any], key: str, file: str, label: str) -> float:
    value = raw[key]
    if isinstance(value, str):
        raise DataError(file, f"must be a number in GB/s, got {value!r} (a unit belongs in the name, not the value)",
                        entry=label, field=key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise DataError(file, f"must be a positive, finite number, got {value!r}", entry=label, field=key)
    return float(value)


def _date(raw: dict[str, Any], file: str, label: str) -> date:
    value = raw["as_of"]
    if not isinstance(value, date):
        raise DataError(file, f"must be a date (YYYY-MM-DD), got {value!r}", entry=label, field="as_of")
    try:
        return past_date(value)
    except ValueError as exc:
        raise DataError(file, str(exc), entry=label, field="as_of") from None
