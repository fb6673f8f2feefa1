"""Runs and check verdicts as a Prometheus node_exporter textfile, under NCCL Inspector's metric names.

NCCL's Inspector profiler plugin (NVIDIA/nccl `plugins/profiler/inspector/inspector_prom.cc`, commit 56a0c229)
writes, per collective, `nccl_algorithm_bandwidth_gbs`, `nccl_bus_bandwidth_gbs` and
`nccl_collective_exec_time_microseconds` with the labels `comm_id, hostname, rank, slurm_job, slurm_job_id, nranks,
n_nodes, gpu_device_id, collective, coll_sn, timestamp, message_size` (its README spells `n_ranks`; the code writes
`nranks`, and so does this module). `collective` is ncclFuncToString's name (`AllReduce`) and `message_size` its
human-readable size (`8.00MB`, 1024-based). linkscope writes the same names and labels where it knows them, adds
`message_size_bytes` (exact) and `run_id`, and leaves out Inspector's per-call labels (comm_id, coll_sn, timestamp,
gpu_device_id), which would make every scrape a new series. Check verdicts are `linkscope_check_status`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from linkscope.hardware.errors import write_output
from linkscope.results.records import CollectiveRow, RunInfo

OP_TO_NCCL = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
              "broadcast": "Broadcast", "reduce": "Reduce", "all_to_all": "AlltoAll", "sendrecv": "SendRecv",
              "gather": "Gather", "scatter": "Scatter"}
"""linkscope op -> ncclFuncToString's name, the `collective` label Inspector writes."""

STATUS_VALUE = {"PASS": 0, "WARN": 1, "FAIL": 2, "SKIP": -1}
"""linkscope_check_status: 0 PASS, 1 WARN, 2 FAIL, -1 SKIP (alert on >= 2)."""

_HELP = {
    "nccl_algorithm_bandwidth_gbs": "NCCL algorithm bandwidth in GB/s (size / time), as NCCL Inspector names it",
    "nccl_bus_bandwidth_gbs": "NCCL bus bandwidth in GB/s (nccl-tests busbw), as NCCL Inspector names it",
    "nccl_collective_exec_time_microseconds": "Collective time in microseconds, as NCCL Inspector names it",
    "linkscope_check_status": "linkscope check item: 0 PASS, 1 WARN, 2 FAIL, -1 SKIP",
}


def human_size(nbytes: int) -> str:
    """Inspector's message_size label: `512B`, `8.00MB` (1024-based, two decimals)."""
    size, unit = float(nbytes), 0
    units = ("B", "KB", "MB", "GB", "TB")
    while size >= 1024.0 and unit < len(units) - 1:
        size /= 1024.0
        unit += 1
    return f"{nbytes}B" if unit == 0 else f"{size:.2f}{units[unit]}"


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _sample(name: str, labels: dict[str, object], value: float) -> str:
    text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{text}}} {value:.6g}"


def run_samples(info: RunInfo, rows: Sequence[CollectiveRow]) -> list[str]:
    """The three Inspector metrics for every op and size of a run (out-of-place where both were measured)."""
    out: dict[tuple[str, int], CollectiveRow] = {}
    for row in rows:
        if row.size_bytes > 0 and (row.placement == "out_of_place" or (row.op, row.size_bytes) not in out):
            out[(row.op, row.size_bytes)] = row
    host = info.hosts[0] if info.hosts else (info.launcher_host or "unknown")
    lines = []
    for (op, size), row in out.items():
        labels: dict[str, object] = {
            "collective": OP_TO_NCCL.get(op, op), "hostname": host, "rank": 0,
            "nranks": row.world_size or info.world_size, "n_nodes": info.nodes, "message_size": human_size(size),
            "message_size_bytes": size, "run_id": info.run_id}
        if row.nccl_algo:
            labels.update(algorithm=row.nccl_algo, protocol=row.nccl_proto or "")
        lines += [_sample("nccl_algorithm_bandwidth_gbs", labels, row.algbw),
                  _sample("nccl_bus_bandwidth_gbs", labels, row.busbw),
                  _sample("nccl_collective_exec_time_microseconds", labels, row.time_us)]
    return lines


def check_samples(items: Sequence[dict[str, Any]], run_id: str, host: str) -> list[str]:
    """`linkscope_check_status` per item and node; items are CheckItem dicts, with a `hostname` where they are one
    node's (a fleet check), else they belong to `host`."""
    return [_sample("linkscope_check_status", {"item": item["name"], "hostname": item.get("hostname") or host,
                                               "status": item["status"], "run_id": run_id},
                    STATUS_VALUE[item["status"]]) for item in items]


def textfile(samples: Sequence[str]) -> str:
    """Samples grouped by metric, each family under its HELP and TYPE lines."""
    families: dict[str, list[str]] = {}
    for sample in samples:
        families.setdefault(sample.split("{", 1)[0], []).append(sample)
    lines = []
    for name, members in families.items():
        lines += [f"# HELP {name} {_HELP.get(name, name)}", f"# TYPE {name} gauge", *members]
    return "\n".join(lines) + "\n"


TEXTFILE_MODE = 0o644
"""Readable by a node_exporter running as another user, as node_exporter's own textfile collectors write them."""


def write_textfile(path: str | Path, samples: Sequence[str]) -> None:
    """Write atomically (a temporary file renamed into place, never over a device or FIFO), so node_exporter never
    reads half a file; mode 0644."""
    write_output(path, textfile(samples), "--prometheus", mode=TEXTFILE_MODE)


def stored_run_samples(info: RunInfo, rows: Sequence[CollectiveRow]) -> list[str]:
    """Everything a stored run says: its collectives, and its verdicts when it is a check (per node for a fleet)."""
    check = info.extra.get("check") or {}
    host = info.hosts[0] if info.hosts else (info.launcher_host or "unknown")
    if info.extra.get("fleet"):
        host = "fleet"  # a fleet's own items (membership, the all-reduce over every node) belong to no one node
    items = list(check.get("items", []))
    for node in (info.extra.get("fleet") or {}).get("nodes", []):
        items += [{**item, "hostname": node["hostname"]} for item in node.get("items", [])]
    return run_samples(info, rows) + check_samples(items, info.run_id, host)
