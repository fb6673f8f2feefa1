"""NCCL's own account of the transports and algorithms it chose, captured during a run on the nccl backend.

NCCL_DEBUG=INFO with the TUNING subsystem goes to per-process files (NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log)
rather than the terminal, unless the user already set NCCL_DEBUG themselves. After the run the files are read
and kept in the run's `extra['nccl_log']`, with `linkscope.probe`'s analysis; NCCL's algorithm, protocol and
channels per size go onto the run's rows.
"""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MAX_LOG_CHARS = 512_000
"""Per file: INFO output of a large job is mostly repetition; the head holds the transport lines."""
TUNING_LINES_PER_SIZE = 4
"""TUNING prints a line per collective call (iterations x sizes); a few per op and size show NCCL's choice."""
SUBSYSTEMS = "INIT,BOOTSTRAP,ENV,TUNING"
"""NCCL's default subsystems (INIT,BOOTSTRAP,ENV: the transport lines) plus TUNING (the algorithm per call)."""
_CAPTURE_VARS = ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS")


def wants_capture(backend: str) -> bool:
    """Capture only on nccl, and never over the user's own NCCL_DEBUG choice."""
    return backend == "nccl" and "NCCL_DEBUG" not in os.environ


def set_capture_env(log_dir: Path) -> None:
    """Point this process (and the ranks it starts) at per-process NCCL log files in `log_dir`."""
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_FILE"] = str(log_dir / "nccl.%h.%p.log")
    os.environ.setdefault("NCCL_DEBUG_SUBSYS", SUBSYSTEMS)


@contextmanager
def capture(backend: str) -> Iterator[Path | None]:
    """For the local launcher: set the variables for the ranks it spawns, restore them afterwards."""
    if not wants_capture(backend):
        yield None
        return
    saved = {k: os.environ.get(k) for k in _CAPTURE_VARS}
    with tempfile.TemporaryDirectory(prefix="linkscope-nccl-") as tmp:
        set_capture_env(Path(tmp))
        try:
            yield Path(tmp)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def read_logs(log_dir: Path, pid: int | None = None, remove: bool = False) -> dict[str, str]:
    """The captured files (all of them, or only process `pid`'s), by file name; `remove` deletes them after."""
    pattern = f"nccl.*.{pid}.log" if pid is not None else "nccl.*.log"
    texts = {}
    for path in sorted(glob.glob(str(log_dir / pattern))):
        with open(path, encoding="utf-8", errors="replace") as fh:
            texts[os.path.basename(path)] = thinned(fh)
        if remove:
            os.remove(path)
    return texts


def thinned(lines: Iterable[str]) -> str:
    """A log kept within MAX_LOG_CHARS: every line up to the limit, except that TUNING lines (one per call) are
    kept a few per op and size, so the last size's choice is there however many iterations ran."""
    from linkscope.probe.nccl_lines import is_tuning_line

    kept: list[str] = []
    size = 0
    seen: dict[str, int] = {}
    for line in lines:
        if is_tuning_line(line):
            key = line.split("NCCL INFO", 1)[-1].split("->", 1)[0].strip()
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > TUNING_LINES_PER_SIZE:
                continue
        if size + len(line) > MAX_LOG_CHARS:
            continue  # later TUNING lines are short and may still fit
        kept.append(line)
        size += len(line)
    return "".join(kept)


def node_log_dir() -> Path:
    """Under torchrun: one directory per job on each node, shared by the node's ranks."""
    path = Path(tempfile.gettempdir()) / f"linkscope-nccl-{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def gather_rank_logs(ctx: Any) -> dict[str, str]:
    """Under torchrun: every rank reads its own file (and deletes it); rank 0 gets them all (others: {})."""
    if ctx.backend != "nccl" or "NCCL_DEBUG_FILE" not in os.environ:
        return {}
    import torch.distributed as dist

    # The directory outlives the job and other jobs' ranks write there too: take only this process's file.
    mine = read_logs(Path(os.environ["NCCL_DEBUG_FILE"]).parent, pid=os.getpid(), remove=True)
    gathered: list[Any] = [None] * ctx.world
    dist.all_gather_object(gathered, mine, group=ctx.ctrl)
    if ctx.rank != 0:
        return {}
    texts: dict[str, str] = {}
    for part in gathered:
        texts.update(part or {})
    return texts


def _expectations(system: dict[str, Any] | None) -> Any:
    """What the probed System promises (NVLink, an RDMA fabric, NVLS), so fallbacks are called fallbacks."""
    if not system:
        return None
    from linkscope.hardware.loader import load_db
    from linkscope.hardware.serialize import system_from_dict
    from linkscope.probe import Expectations

    return Expectations.from_system(system_from_dict(system, load_db().gpu))


def log_extra(texts: dict[str, str], system: dict[str, Any] | None = None) -> dict[str, Any]:
    """What is stored in RunInfo.extra['nccl_log']: the files and, where available, their analysis against
    what the probed System promises."""
    from linkscope.probe import analyse_nccl_log

    out: dict[str, Any] = {"files": texts}
    try:
        out["analysis"] = analyse_nccl_log("\n".join(texts.values()), _expectations(system),
                                           source="linkscope bench").to_dict()
    except Exception as exc:  # an unreadable log must not cost the measurement
        out["analysis_error"] = f"{type(exc).__name__}: {exc}"
    return out


def apply_choices(rows: list[Any], choices: list[dict[str, Any]], world: int) -> list[Any]:
    """Set NCCL's algorithm, protocol and channels on the rows they belong to (by op and NCCL's byte count);
    returns the rows changed. A choice that does not name its op (the old numeric form) goes to the only op."""
    from linkscope.probe.nccl_lines import nccl_bytes

    ops = {r.op for r in rows}
    by_key: dict[tuple[str, int], dict[str, Any]] = {}
    for choice in choices:
        op = choice.get("op") or (next(iter(ops)) if len(ops) == 1 else None)
        if op is not None:
            by_key.setdefault((op, int(choice["nccl_bytes"])), choice)
    changed = []
    for row in rows:
        found = by_key.get((row.op, nccl_bytes(row.op, row.size_bytes, world)))
        if found is not None:
            row.nccl_algo, row.nccl_proto, row.nccl_channels = found["algo"], found["proto"], found["channels"]
            changed.append(row)
    return changed
