"""`linkscope compare`: several stored runs side by side (busbw at chosen sizes, small-message latency, peak busbw,
% against the first run) and what differs in their environment."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from linkscope.hardware.errors import UserError
from linkscope.results.records import NOT_A_SWEEP, CollectiveRow, RunInfo

DEFAULT_SIZES = (8, 1 << 20, 64 << 20, 1 << 30)


def _pct(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return round((value - base) / base * 100.0, 1)


def _op_rows(rows: list[CollectiveRow], op: str) -> dict[int, CollectiveRow]:
    out: dict[int, CollectiveRow] = {}
    for row in rows:
        if row.op == op and (row.placement == "out_of_place" or row.size_bytes not in out):
            out[row.size_bytes] = row
    return out


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def environment(info: RunInfo) -> dict[str, str | None]:
    """The facts worth diffing: GPU, driver, NCCL, torch, NCCL_* variables, topology, hosts."""
    system = info.system if isinstance(info.system, dict) else {}
    scale_up = system.get("scale_up") if isinstance(system.get("scale_up"), dict) else {}
    scale_out = system.get("scale_out") if isinstance(system.get("scale_out"), dict) else {}
    devices = _devices(info)
    names = sorted({str(d.get("name")) for d in devices if d.get("name")})
    per_host: dict[str, int] = {}
    for d in devices:
        per_host[str(d.get("host"))] = per_host.get(str(d.get("host")), 0) + 1
    env = {
        "gpu": _text(system.get("gpu")) or (", ".join(names) if names else None),
        "gpus_per_node": _text(system.get("gpus")) or (str(max(per_host.values())) if per_host else None),
        "topology": f"{scale_up.get('kind')} {scale_up.get('generation')}" if scale_up else None,
        "scale_out": f"{scale_out.get('nics')}x {scale_out.get('fabric')}" if scale_out else None,
        "hosts": ",".join(info.hosts),
        "backend": info.backend,
        "world_size": str(info.world_size),
        **{f"version.{k}": v for k, v in info.versions.items() if k in ("driver", "nccl", "rccl", "torch", "cuda")},
        **{f"env.{k}": v for k, v in info.nccl_env.items()},
    }
    return env


def _devices(info: RunInfo) -> list[dict[str, Any]]:
    """The device lines an imported run recorded (`# Rank 0 ... on HOST device 0 [..] NAME`)."""
    ranks = info.groups.get("ranks") if isinstance(info.groups, dict) else None
    return [d for d in ranks if isinstance(d, dict)] if isinstance(ranks, list) else []


def _check_comparable(runs: list[tuple[RunInfo, list[CollectiveRow]]]) -> None:
    """Only collective sweeps compare: a training run, a p2p matrix or a MoE run would fill the table with
    dashes."""
    for info, rows in runs:
        if info.kind in NOT_A_SWEEP:
            what = NOT_A_SWEEP[info.kind]
            raise UserError(f"run {info.run_id} is {what}, not a collective sweep; compare compares bench, check and "
                            f"import runs with each other, or bench train runs with each other (see `linkscope runs "
                            f"show {info.run_id}`)")
        if not rows:
            raise UserError(f"run {info.run_id} has no collective measurements (status {info.status}); "
                            "nothing to compare")


def compare_runs(runs: list[tuple[RunInfo, list[CollectiveRow]]], op: str | None = None,
                 sizes: tuple[int, ...] = DEFAULT_SIZES) -> dict[str, Any]:
    """Per run: busbw at `sizes` (nearest measured size at or below), small-message latency, peak busbw, each with
    the difference in % against the first run; and the environment keys whose values differ."""
    _check_comparable(runs)
    if op is None:
        ops = [r.op for _, rows in runs for r in rows]
        op = max(set(ops), key=ops.count) if ops else "all_reduce"
    for info, rows in runs:
        if not any(r.op == op for r in rows):
            has = sorted({r.op for r in rows})
            raise UserError(f"run {info.run_id} has no {op} measurements (it has: {', '.join(has)}); "
                            "choose an op both runs measured with --op")
    common = _smallest_common_size(runs, op)
    table = [_entry(info, rows, op, sizes, common) for info, rows in runs]
    base: dict[str, Any] = table[0] if table else {}
    for entry in table:
        entry["busbw_pct"] = {k: _pct(v, base["busbw"].get(k)) for k, v in entry["busbw"].items()}
        entry["latency_pct"] = _pct(entry["latency_us"], base["latency_us"])
        entry["peak_busbw_pct"] = _pct(entry["peak_busbw"], base["peak_busbw"])
    choices = _choice_diff(runs, op)
    envs = [environment(info) for info, _ in runs]
    keys = sorted({k for env in envs for k in env})
    differs = {k: [env.get(k) for env in envs] for k in keys if len({env.get(k) for env in envs}) > 1}
    return {"op": op, "sizes": list(sizes), "latency_bytes": common, "runs": table, "environment_diff": differs,
            "nccl_choice_diff": choices}


def _smallest_common_size(runs: list[tuple[RunInfo, list[CollectiveRow]]], op: str) -> int | None:
    """The smallest positive size every run measured `op` at: latencies compare only at one size."""
    sets = [{r.size_bytes for r in rows if r.op == op and r.size_bytes > 0} for _, rows in runs]
    common = set.intersection(*sets) if sets else set()
    return min(common) if common else None


def _entry(info: RunInfo, rows: list[CollectiveRow], op: str, sizes: tuple[int, ...],
           common: int | None) -> dict[str, Any]:
    """One run's line: busbw at `sizes`, latency at the common smallest size, peak busbw over both placements."""
    by_size = _op_rows(rows, op)
    entry: dict[str, Any] = {"run_id": info.run_id, "label": info.label, "kind": info.kind, "busbw": {},
                             "latency_us": None, "latency_bytes": common, "peak_busbw": None, "peak_placement": None,
                             "peak_bytes": None}
    for size in sizes:
        row = by_size.get(size)
        entry["busbw"][str(size)] = None if row is None else round(row.busbw, 3)
    if common is not None:
        entry["latency_us"] = round(by_size[common].time_us, 2)
    sized = [r for r in rows if r.op == op and r.size_bytes > 0]
    if sized:
        best = max(sized, key=lambda r: r.busbw)
        entry.update(peak_busbw=round(best.busbw, 3), peak_placement=best.placement, peak_bytes=best.size_bytes)
    return entry


def _choice_diff(runs: list[tuple[RunInfo, list[CollectiveRow]]], op: str) -> list[dict[str, Any]]:
    """Sizes where NCCL chose another algorithm or protocol than in the first run: why two runs can differ."""
    if not runs:
        return []
    base = {s: r for s, r in _op_rows(runs[0][1], op).items() if r.nccl_algo}
    out = []
    for info, rows in runs[1:]:
        for size, row in sorted(_op_rows(rows, op).items()):
            first = base.get(size)
            if first is None or not row.nccl_algo:
                continue
            if (row.nccl_algo, row.nccl_proto) != (first.nccl_algo, first.nccl_proto):
                out.append({"run_id": info.run_id, "size": size, "base": f"{first.nccl_algo}/{first.nccl_proto}",
                            "this": f"{row.nccl_algo}/{row.nccl_proto}"})
    return out


def choice_lines(data: dict[str, Any]) -> list[str]:
    """One line per size where NCCL chose differently from the first run."""
    base = data["runs"][0]["run_id"] if data["runs"] else "-"
    return [f"NCCL chose differently: run {d['run_id']} at {_size_label(d['size'])}: {d['this']} "
            f"(run {base}: {d['base']})" for d in data.get("nccl_choice_diff", [])]


def _size_label(nbytes: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def _cell(value: float | None, pct: float | None) -> str:
    """Four significant figures, the % against the base run under it: narrow enough for 80 columns whole."""
    if value is None:
        return "-"
    return f"{value:.4g}" if pct is None or pct == 0 else f"{value:.4g}\n{pct:+.0f}%"


def busbw_table(data: dict[str, Any]) -> Table:
    """busbw at the compared sizes, latency and peak per run, each with its % against the first run."""
    base = data["runs"][0]["run_id"] if data["runs"] else "-"
    table = Table(title=f"{data['op']} busbw GB/s by size, latency, peak; % vs {base}", show_edge=False)
    # Ids, size headers and percentages never wrap or get cut; only the free-text label folds.
    table.add_column("run", no_wrap=True, min_width=8)
    table.add_column("label", overflow="fold", max_width=10)
    for size in DEFAULT_SIZES:
        label = _size_label(size)
        table.add_column(label if label[-1].isalpha() else f"{label} B", justify="right", no_wrap=True)
    common = data.get("latency_bytes")
    table.add_column(f"lat us@{_size_label(common)}" if common else "lat us", justify="right", no_wrap=True)
    table.add_column("peak", justify="right", no_wrap=True)
    for e in data["runs"]:
        table.add_row(e["run_id"], escape(e["label"] or ""), *[_cell(e["busbw"][str(s)], e["busbw_pct"][str(s)])
                                                                for s in DEFAULT_SIZES],
                      _cell(e["latency_us"], e["latency_pct"]), _peak_cell(e))
    if not common:
        table.caption = "no size all runs measured: latencies are not compared"
    else:
        table.caption = "peak: the best busbw of any size, out-of-place (oop) or in-place (ip)"
    return table


def _peak_cell(e: dict[str, Any]) -> str:
    """The peak with the placement it came from (`ip`, `oop`), its % against the base run under it."""
    cell = _cell(e["peak_busbw"], e["peak_busbw_pct"])
    if e.get("peak_busbw") is None:
        return cell
    mark = " ip" if e.get("peak_placement") == "in_place" else " oop"
    head, _, rest = cell.partition("\n")
    return head + mark + ("\n" + rest if rest else "")


def environment_table(data: dict[str, Any]) -> Table | None:
    """What differs between the runs' environments (None when nothing does); unrecorded facts read unknown."""
    if not data["environment_diff"]:
        return None
    diff = Table(title="environment: what differs", show_edge=False)
    diff.add_column("key")
    for e in data["runs"]:
        diff.add_column(e["run_id"])
    for key, values in data["environment_diff"].items():
        diff.add_row(key, *[escape("unknown" if v is None else str(v)) for v in values])
    return diff
