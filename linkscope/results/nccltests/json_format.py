"""Read the JSON file nccl-tests writes with `-J file.json` (src/util.cu, JSON_FILE_VERSION 1).

Top level: version, start_time, args, env, nccl_version, config {..., devices [...]}, results [...],
out_of_bounds, average_bus_bandwidth, errors, end_time. nccl-tests writes `devices` inside `config`; a
top-level `devices` list is accepted too. Booleans are the strings "true"/"false", `root` is a `%6i` string,
NaN doubles are the string "nan", and an unchecked placement has `nwrong: null`.
"""

from __future__ import annotations

import math
from typing import Any

from linkscope.results.nccltests.validate import invalid_reason
from linkscope.results.nccltests.model import (Device, NcclTestsSection, ParsedNcclTests, Problem,
                                               nccl_version_from_code)
from linkscope.results.busbw import OP_TO_BINARY
from linkscope.results.records import CollectiveRow, Placement

_CONFIG_KEYS = {"nthreads": "nthreads", "ngpus": "ngpus", "minimum_bytes": "min_bytes",
                "maximum_bytes": "max_bytes", "step_factor": "step_factor", "step_bytes": "step_bytes",
                "warmup_iters": "warmup_iters", "iterations": "iters", "aggregated_iterations": "agg_iters",
                "validation": "validation", "graph": "graph", "blocking_collectives": "blocking",
                "parallel_init": "parallel_init", "per_iter_timing": "per_iter_timing",
                "per_iter_skip": "per_iter_skip"}
_ITER_KEYS = ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct")


class _Bad(ValueError):
    """One result entry that cannot be read."""


def parse_nccl_tests_json(data: Any, source_name: str) -> ParsedNcclTests:
    """Read a decoded nccl-tests `-J` document (or a list of them) into sections of CollectiveRows."""
    parsed = ParsedNcclTests(source_name=source_name, format="json")
    documents = data if isinstance(data, list) else [data]
    for index, document in enumerate(documents):
        where = f"document {index}: " if isinstance(data, list) else ""
        if not isinstance(document, dict) or not isinstance(document.get("results"), list):
            parsed.problems.append(Problem(None, f"{where}not an nccl-tests JSON report (no 'results' list)"))
            continue
        parsed.sections.append(_section(document, parsed, where))
        _document_metadata(document, parsed)
    return parsed


def _document_metadata(document: dict[str, Any], parsed: ParsedNcclTests) -> None:
    code = document.get("nccl_version")
    if parsed.nccl_version is None and isinstance(code, int) and code > 0:
        parsed.nccl_version = nccl_version_from_code(code)
    args = document.get("args")
    if not parsed.command and isinstance(args, list):
        parsed.command = " ".join(str(a) for a in args)
    for key in ("start_time", "end_time", "env", "errors"):
        if key in document:
            parsed.extra.setdefault(key, document[key])


def _section(document: dict[str, Any], parsed: ParsedNcclTests, where: str) -> NcclTestsSection:
    section = NcclTestsSection(layout="unknown")
    args = document.get("args")
    if isinstance(args, list) and args:
        section.set_binary(str(args[0]))
    raw_config = document.get("config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    section.config = {ours: config[theirs] for theirs, ours in _CONFIG_KEYS.items() if theirs in config}
    section.devices = _devices(config.get("devices", document.get("devices")), parsed, where)
    section.out_of_bounds, section.out_of_bounds_ok = _out_of_bounds(document.get("out_of_bounds"))
    section.avg_busbw = _number_or_none(_get(document.get("average_bus_bandwidth"), "bandwidth"))
    iters = section.config.get("iters", 0)
    for i, entry in enumerate(document["results"]):
        try:
            rows = _rows(entry, section, iters if isinstance(iters, int) else 0)
        except _Bad as exc:
            parsed.problems.append(Problem(None, f"{where}results[{i}]: {exc}"))
            continue
        reasons = [r for r in map(invalid_reason, rows) if r]
        if reasons:
            parsed.problems.append(Problem(None, f"{where}results[{i}]: {reasons[0]}", invalid=True))
            continue
        section.rows.extend(rows)
    return section


def _devices(raw: Any, parsed: ParsedNcclTests, where: str) -> list[Device]:
    devices = []
    for i, d in enumerate(raw if isinstance(raw, list) else []):
        try:
            devices.append(Device(rank=int(d["rank"]), host=str(d["hostname"]), device=int(d["device"]),
                                  name=str(d.get("device_info", "")), bus_id=str(d.get("device_hex", "")),
                                  group=_int_or_none(d.get("group")), pid=_int_or_none(d.get("pid"))))
        except (KeyError, TypeError, ValueError) as exc:
            parsed.problems.append(Problem(None, f"{where}devices[{i}]: unreadable ({exc!r})"))
    return devices


def _rows(entry: Any, section: NcclTestsSection, iters: int) -> list[CollectiveRow]:
    if not isinstance(entry, dict):
        raise _Bad("not an object")
    try:
        size, count = int(entry["size"]), int(entry["count"])
        dtype, redop, root = str(entry["type"]), str(entry["redop"]), int(str(entry["root"]).strip())
    except (KeyError, TypeError, ValueError) as exc:
        raise _Bad(f"size/count/type/redop/root unreadable ({exc!r})") from None
    rows = []
    found = entry.get("linkscope")
    ours: dict[str, Any] = found if isinstance(found, dict) else {}
    op = _entry_op(entry, ours, section.op)
    for placement in ("out_of_place", "in_place"):
        values = entry.get(placement)
        if values is None:
            continue  # nccl-tests writes null when a placement was not run
        row = CollectiveRow(op=op, size_bytes=size, count=count, dtype=dtype, redop=redop, root=root,
                            placement=placement, world_size=section.world_size, iters=iters,
                            **_measurements(values, placement), **_repeat_stats(ours.get(placement)))
        row.iter_stats = _iter_stats(entry.get(f"{placement}_per_iter", values))
        rows.append(row)
    if not rows:
        raise _Bad("neither out_of_place nor in_place has measurements")
    return rows


def _entry_op(entry: dict[str, Any], ours: dict[str, Any], section_op: str) -> str:
    """The op of one result: the file's binary, else linkscope's own key or nccl-tests' experiment name."""
    if section_op in OP_TO_BINARY:
        return section_op
    for candidate in (ours.get("op"), entry.get("experiment_name")):
        if isinstance(candidate, str) and candidate in OP_TO_BINARY:
            return candidate
    return section_op


def _repeat_stats(values: Any) -> dict[str, Any]:
    """The spread over `--repeat` sweeps that linkscope's own JSON adds to each placement."""
    if not isinstance(values, dict) or not isinstance(values.get("times_us"), list):
        return {}
    times = [float(t) for t in values["times_us"] if isinstance(t, (int, float))]
    return {"repeats": len(times), "times_us": times, "time_us_min": _number_or_none(values.get("time_us_min")),
            "time_us_max": _number_or_none(values.get("time_us_max")),
            "time_us_stdev": _number_or_none(values.get("time_us_stdev"))}


def _measurements(values: Any, placement: Placement) -> dict[str, Any]:
    if not isinstance(values, dict):
        raise _Bad(f"{placement} is not an object")
    time_us = _finite(values.get("time", values.get("cpu_time")), f"{placement}.time")
    wrong = values.get("nwrong")
    return {"time_us": time_us, "algbw": _finite(values.get("alg_bw"), f"{placement}.alg_bw"),
            "busbw": _finite(values.get("bus_bw"), f"{placement}.bus_bw"),
            "nwrong": None if wrong is None else int(_finite(wrong, f"{placement}.nwrong"))}


def _iter_stats(values: Any) -> dict[str, float]:
    if not isinstance(values, dict):
        return {}
    stats = {k: _number_or_none(values.get(k)) for k in _ITER_KEYS}
    return {k: v for k, v in stats.items() if v is not None}


def _out_of_bounds(raw: Any) -> tuple[int | None, bool | None]:
    count = _int_or_none(_get(raw, "count"))
    okay = _get(raw, "okay")
    return count, None if okay is None else str(okay).lower() == "true"


def _finite(value: Any, name: str) -> float:
    number = _number_or_none(value)
    if number is None:
        raise _Bad(f"{name} is {value!r}, not a finite number")
    return number


def _number_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _int_or_none(value: Any) -> int | None:
    number = _number_or_none(value)
    return int(number) if number is not None else None


def _get(raw: Any, key: str) -> Any:
    return raw.get(key) if isinstance(raw, dict) else None
