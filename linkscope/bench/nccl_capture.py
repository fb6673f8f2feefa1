"""NCCL's own account of the transports it chose, captured during a run on the nccl backend.

NCCL_DEBUG=INFO goes to per-process files (NCCL_DEBUG_FILE=<dir>/nccl.%h.%p.log) rather than the
terminal, unless the user already set NCCL_DEBUG themselves. After the run the files are read and kept
in the run's `extra['nccl_log']`, with `linkscope.probe`'s analysis.
"""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MAX_LOG_CHARS = 512_000
"""Per file: INFO output of a large job is mostly repetition; the head holds the transport lines."""


def wants_capture(backend: str) -> bool:
    """Capture only on nccl, and never over the user's own NCCL_DEBUG choice."""
    return backend == "nccl" and "NCCL_DEBUG" not in os.environ


def set_capture_env(log_dir: Path) -> None:
    """Point this process (and the ranks it starts) at per-process NCCL log files in `log_dir`."""
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["NCCL_DEBUG_FILE"] = str(log_dir / "nccl.%h.%p.log")


@contextmanager
def capture(backend: str) -> Iterator[Path | None]:
    """For the local launcher: set the variables for the ranks it spawns, restore them afterwards."""
    if not wants_capture(backend):
        yield None
        return
    saved = {k: os.environ.get(k) for k in ("NCCL_DEBUG", "NCCL_DEBUG_FILE")}
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
            texts[os.path.basename(path)] = fh.read(MAX_LOG_CHARS)
        if remove:
            os.remove(path)
    return texts


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
