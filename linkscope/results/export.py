"""A stored run as nccl-tests' `-J` JSON (plus linkscope's own keys), as CSV, or as nccl-tests' text table.

JSON mirrors nccl-tests where it can, quirks included, so the same scripts read both: `root` is the `%6i`
string, booleans are "true"/"false" strings, `time` is µs and `alg_bw`/`bus_bw` GB/s. What nccl-tests has no
place for lives under `linkscope` keys: run metadata at the top, and per result the op, world size and the
spread over `--repeat` runs for each placement.
"""

from __future__ import annotations

import csv
import io
import re
import shlex
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from linkscope.results.nccltests.table import (avg_busbw, format_nccl_tests_table, format_table_footer,
                                               format_table_header, format_table_row, paired)
from linkscope.results.records import CollectiveRow, PairRow, RunInfo

__all__ = ["CSV_COLUMNS", "avg_busbw", "format_nccl_tests_table", "format_table_footer", "format_table_header",
           "format_table_row", "run_to_csv", "run_to_json"]

JSON_FILE_VERSION = 1
"""The nccl-tests JSON_FILE_VERSION whose layout `run_to_json` follows."""

CSV_COLUMNS: tuple[str, ...] = (
    "op", "size_bytes", "count", "dtype", "redop", "root", "placement", "world_size", "time_us",
    "algbw_gb_per_s", "busbw_gb_per_s", "nwrong", "max_error", "iters", "repeats", "time_us_min", "time_us_max",
    "time_us_stdev")


def run_to_json(info: RunInfo, rows: Sequence[CollectiveRow], pair_rows: Sequence[PairRow]) -> dict[str, Any]:
    """The run in nccl-tests' `-J` layout, with linkscope's metadata and per-row repeat statistics added."""
    return {
        "version": JSON_FILE_VERSION,
        "start_time": info.started_at,
        "args": _args(info.command),
        "env": [f"{k}={v}" for k, v in sorted(info.nccl_env.items())],
        "nccl_version": _nccl_version_code(info.versions.get("nccl")),
        "config": {**_config(info.config), "devices": _devices(info.groups.get("ranks", []))},
        "results": [_result(oop, ip) for oop, ip in paired(rows)],
        "out_of_bounds": {"count": sum(1 for r in rows if r.nwrong),
                          "okay": "false" if any(r.nwrong for r in rows) else "true"},
        "average_bus_bandwidth": _average(rows),
        "end_time": info.ended_at,
        "linkscope": _linkscope(info, rows, pair_rows),
    }


def _linkscope(info: RunInfo, rows: Sequence[CollectiveRow], pair_rows: Sequence[PairRow]) -> dict[str, Any]:
    return {
        "run_id": info.run_id, "kind": info.kind, "label": info.label, "status": info.status,
        "started_at": info.started_at, "ended_at": info.ended_at, "error": info.error, "hosts": info.hosts,
        "world_size": info.world_size, "nodes": info.nodes, "backend": info.backend, "versions": info.versions,
        "nccl_env": info.nccl_env, "system": info.system, "config": info.config, "groups": info.groups,
        "command": info.command, "extra": info.extra,
        "avg_busbw_by_op": _avg_by_collective(rows),
        "pairs": [asdict(p) for p in pair_rows],
    }


def _avg_by_collective(rows: Sequence[CollectiveRow]) -> dict[str, float]:
    """nccl-tests' `Avg bus bandwidth` per collective (per collective and rank count where one op ran at
    several): one average over different collectives would mean nothing."""
    groups = list(dict.fromkeys((r.op, r.world_size) for r in rows))
    several = {op for op, _ in groups if sum(o == op for o, _ in groups) > 1}
    return {(f"{op}@{world}ranks" if op in several else op): avg_busbw([r for r in rows if (r.op, r.world_size) ==
                                                                         (op, world)]) for op, world in groups}


def _average(rows: Sequence[CollectiveRow]) -> dict[str, Any]:
    """The file-level average of nccl-tests' JSON: its value where the run is one collective, else none (the
    per-collective figures are under `by_collective`)."""
    by = _avg_by_collective(rows)
    if len(by) <= 1:
        return {"bandwidth": avg_busbw(rows), "okay": "unchecked"}
    return {"bandwidth": None, "okay": "unchecked", "by_collective": by}


def _result(oop: CollectiveRow | None, ip: CollectiveRow | None) -> dict[str, Any]:
    first = oop or ip
    assert first is not None  # paired() never yields two Nones
    return {
        "size": first.size_bytes, "count": first.count, "type": first.dtype, "redop": first.redop,
        "root": "%6i" % first.root,
        "out_of_place": _placement(oop), "in_place": _placement(ip),
        "actual_iterations": first.iters, "experiment_name": first.op,
        "linkscope": {"op": first.op, "world_size": first.world_size,
                      "out_of_place": _spread(oop), "in_place": _spread(ip),
                      "nccl_choice": None if first.nccl_algo is None else
                      {"algo": first.nccl_algo, "proto": first.nccl_proto, "channels": first.nccl_channels}},
    }


def _placement(row: CollectiveRow | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"time": row.time_us, "alg_bw": row.algbw, "bus_bw": row.busbw,
            "nwrong": None if row.nwrong is None else float(row.nwrong)}


def _spread(row: CollectiveRow | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {"repeats": row.repeats, "time_us_min": row.time_us_min, "time_us_max": row.time_us_max,
            "time_us_stdev": row.time_us_stdev, "times_us": row.times_us, "max_error": row.max_error,
            "iter_stats": row.iter_stats}


_CONFIG_TO_NCCL_TESTS = {"nthreads": "nthreads", "ngpus": "ngpus", "min_bytes": "minimum_bytes",
                         "max_bytes": "maximum_bytes", "step_factor": "step_factor", "step_bytes": "step_bytes",
                         "warmup_iters": "warmup_iters", "iters": "iterations", "agg_iters": "aggregated_iterations",
                         "validation": "validation", "graph": "graph"}


def _config(config: dict[str, Any]) -> dict[str, Any]:
    """The run options nccl-tests also has, under nccl-tests' names; linkscope's full config is kept apart."""
    return {theirs: config[ours] for ours, theirs in _CONFIG_TO_NCCL_TESTS.items() if ours in config}


_DEVICE_KEYS = {"host": "hostname", "bus_id": "device_hex", "name": "device_info"}


def _devices(ranks: Any) -> list[dict[str, Any]]:
    """Rank records under nccl-tests' device keys (hostname, device_hex, device_info) where they have them."""
    if not isinstance(ranks, list):
        return []
    return [{_DEVICE_KEYS.get(str(k), str(k)): v for k, v in r.items()} for r in ranks if isinstance(r, dict)]


def _args(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _nccl_version_code(version: str | None) -> int | None:
    """`2.21.5` or `2.21.5+cuda12.4` -> NCCL_VERSION_CODE 22105 (None when unknown)."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version or "")
    if not match:
        return None
    major, minor, patch = (int(g) for g in match.groups())
    return major * 10000 + minor * 100 + patch if (major, minor) >= (2, 9) else major * 1000 + minor * 100 + patch


def run_to_csv(rows: Sequence[CollectiveRow]) -> str:
    """One CSV line per op, size and placement; column names carry their units."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        writer.writerow([r.op, r.size_bytes, r.count, r.dtype, r.redop, r.root, r.placement, r.world_size,
                         r.time_us, r.algbw, r.busbw, _blank(r.nwrong), _blank(r.max_error), r.iters, r.repeats,
                         _blank(r.time_us_min), _blank(r.time_us_max), _blank(r.time_us_stdev)])
    return out.getvalue()


def _blank(value: float | int | None) -> Any:
    return "" if value is None else value


TRAIN_CSV_FIELDS = ("label", "status", "model", "ranks", "layout", "step_time_s", "step_time_s_stdev", "tokens_per_s",
                    "tflops_per_rank", "mfu", "mfu_peak_tflops", "mfu_precision", "peak_memory_gib",
                    "predicted_step_time_s", "error_pct")


def train_run_to_csv(info: RunInfo) -> str:
    """A `bench train` run as CSV, one line per measured point."""
    points = (info.extra.get("train_summary") or {}).get("points") or []
    lines = [",".join(TRAIN_CSV_FIELDS)]
    for doc in points:
        values = {**doc, "layout": doc["parallelism"]["layout"],
                  "predicted_step_time_s": (doc.get("predicted") or {}).get("step_time_s")}
        lines.append(",".join("" if values.get(k) is None else str(values[k]) for k in TRAIN_CSV_FIELDS))
    return "\n".join(lines) + "\n"


MOE_CSV_FIELDS = ("phase", "ranks", "nodes", "tokens_per_rank", "hidden", "topk", "experts", "skew", "precision",
                  "time_us", "time_us_min", "time_us_max", "gb_per_s", "bytes_per_rank", "imbalance",
                  "predicted_time_us", "error_pct")


def moe_run_to_csv(info: RunInfo) -> str:
    """A `bench moe` run as CSV: one line for dispatch, one for combine (GB/s in DeepEP's convention)."""
    doc = info.extra.get("moe_summary") or {}
    lines = [",".join(MOE_CSV_FIELDS)]
    for phase in ("dispatch", "combine") if doc else ():
        values = {**doc["shape"], "phase": phase, "ranks": doc["ranks"], "nodes": doc["nodes"],
                  "time_us": doc[f"{phase}_us"], "time_us_min": doc[f"{phase}_us_min"],
                  "time_us_max": doc[f"{phase}_us_max"], "gb_per_s": doc[f"{phase}_gb_per_s"],
                  "bytes_per_rank": doc[f"{phase}_bytes_per_rank"], "imbalance": doc["imbalance"],
                  "predicted_time_us": (doc.get("predicted") or {}).get(f"{phase}_us"),
                  "error_pct": (doc.get("error_pct") or {}).get(phase)}
        lines.append(",".join("" if values.get(k) is None else str(values[k]) for k in MOE_CSV_FIELDS))
    return "\n".join(lines) + "\n"


def nccl_choice_lines(rows: Sequence[CollectiveRow],
                      predicted: dict[tuple[str, int], tuple[str, str]] | None = None) -> list[str]:
    """`#`-comment lines (below an nccl-tests table, so the table stays as nccl-tests prints it): per op and size
    what NCCL chose (NCCL_DEBUG_SUBSYS=TUNING), and the model's algorithm beside it where `predicted` has one."""
    seen: dict[tuple[str, int], CollectiveRow] = {}
    for row in rows:
        if row.nccl_algo is not None:
            seen.setdefault((row.op, row.size_bytes), row)
    if not seen:
        return []
    lines = ["# what NCCL chose (NCCL_DEBUG_SUBSYS=TUNING)" + ("; model's choice beside it" if predicted else "")]
    for (op, size), row in seen.items():
        channels = f" x{row.nccl_channels}" if row.nccl_channels else ""
        model = (predicted or {}).get((op, size))
        beside = f"   model: {model[0]}/{model[1]}" if model else ""
        lines.append(f"#  {op:>14} {size:>12} B  {row.nccl_algo}/{row.nccl_proto}{channels}{beside}")
    return lines


KV_CSV_FIELDS = ("block_tokens", "in_flight", "messages_per_pair", "page_bytes", "bytes_per_pair", "time_us",
                 "time_us_min", "time_us_max", "gb_per_s", "predicted_time_us", "predicted_gb_per_s")


def kv_run_to_csv(info: RunInfo) -> str:
    """A `bench kv` run as CSV: one line per block size and in-flight count."""
    doc = info.extra.get("kv_summary") or {}
    lines = [",".join(KV_CSV_FIELDS)]
    for point in doc.get("points") or []:
        predicted = point.get("predicted") or {}
        values = {**point, "predicted_time_us": predicted.get("time_us"),
                  "predicted_gb_per_s": predicted.get("gb_per_s")}
        lines.append(",".join("" if values.get(k) is None else str(values[k]) for k in KV_CSV_FIELDS))
    return "\n".join(lines) + "\n"
