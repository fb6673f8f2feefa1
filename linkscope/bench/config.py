"""What a `bench` or `p2p` run is asked to do, validated once at the edge.

Plain dataclasses, picklable, so the same object travels to every spawned rank. `validated()` returns a
normalised copy (canonical op and type names) or raises UserError naming the bad value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from linkscope.bench.dtypes import check_redop, dtype_by_name
from linkscope.bench.ops import expand_op_names
from linkscope.bench.sizes import check_size_cap, size_sweep
from linkscope.hardware.errors import UserError, check_output_path
from linkscope.hardware.limits import (MAX_ITERS, MAX_MIN_TIME_S, MAX_REPEAT, MAX_TIMEOUT_S, MAX_WARMUP,
                                       check_number)

BACKENDS = ("auto", "gloo", "nccl")
DEFAULT_TIMEOUT_S = 300.0


@dataclass
class RunOptions:
    """How ranks are started and where results go; shared by `bench` and `p2p`."""

    backend: str = "auto"
    """`auto` = nccl when CUDA is available, else gloo."""
    nproc: int | None = None
    """Local ranks to start outside torchrun; None = 2 on CPU, the visible GPU count with CUDA."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Give up when no rank makes progress for this long."""
    label: str = ""
    db_path: str | None = None
    """SQLite file; None = LINKSCOPE_DB or the user data directory."""
    json_path: str | None = None
    csv_path: str | None = None
    quiet: bool = False
    oversubscribe: bool = False
    """Allow more local CPU ranks than cores (`hardware.limits.OVERSUBSCRIBE_FACTOR` per core at most)."""

    def validated(self) -> RunOptions:
        """A checked copy."""
        backend = self.backend.strip().lower()
        if backend not in BACKENDS:
            raise UserError(f"unknown backend '{self.backend}'; choose one of: {', '.join(BACKENDS)}")
        if self.nproc is not None and self.nproc < 1:
            raise UserError(f"must be at least 1, got {self.nproc}", field="nproc")
        check_number(self.timeout_s, "--timeout", 0, MAX_TIMEOUT_S, low_open=True)
        # Checked before the sweep: finding an unwritable export only at the end would waste the run.
        check_output_path(self.json_path, "--json-file")
        check_output_path(self.csv_path, "--csv")
        return replace(self, backend=backend)


@dataclass
class BenchConfig:
    """One collective sweep, with nccl-tests' option names in the comments."""

    ops: tuple[str, ...] = ("all_reduce",)
    min_bytes: int = 8
    """-b"""
    max_bytes: int = 64 * 1024**2
    """-e"""
    step_factor: int = 2
    """-f"""
    iters: int = 20
    """-n"""
    warmup: int = 5
    """-w"""
    check: int = 1
    """-c: correctness-check iterations per size and placement; 0 = off."""
    dtype: str = "float"
    """-d"""
    redop: str = "sum"
    """-o"""
    average: int = 1
    """-a: 0 rank 0, 1 mean, 2 min, 3 max of the per-rank times."""
    blocking: int = 0
    """-z: 1 = wait and barrier after every operation."""
    cudagraph: int = 0
    """-G: graph launches (nccl only); 0 = off."""
    root: int = 0
    """-r"""
    repeat: int = 1
    min_time_s: float = 0.0
    """Raise the iteration count per size so each size is timed at least this long."""
    run: RunOptions = field(default_factory=RunOptions)

    def validated(self) -> BenchConfig:
        """A checked, normalised copy; raises UserError on the first bad value."""
        _check_counts(self)
        size_sweep(self.min_bytes, self.max_bytes, self.step_factor)
        return replace(
            self,
            ops=expand_op_names(self.ops),
            dtype=dtype_by_name(self.dtype).name,
            redop=check_redop(self.redop),
            run=self.run.validated(),
        )

    def sizes(self) -> list[int]:
        """The message sizes of the sweep, in bytes."""
        return size_sweep(self.min_bytes, self.max_bytes, self.step_factor)


def _check_counts(cfg: BenchConfig) -> None:
    rules = [
        (cfg.iters >= 1, f"-n/--iters must be at least 1, got {cfg.iters}"),
        (cfg.warmup >= 0, f"-w/--warmup must be 0 or more, got {cfg.warmup}"),
        (cfg.check >= 0, f"-c/--check must be 0 or more, got {cfg.check}"),
        (cfg.average in (0, 1, 2, 3), f"-a/--average must be 0, 1, 2 or 3, got {cfg.average}"),
        (cfg.blocking in (0, 1), f"-z/--blocking must be 0 or 1, got {cfg.blocking}"),
        (cfg.cudagraph >= 0, f"-G/--cudagraph must be 0 or more, got {cfg.cudagraph}"),
        (cfg.root >= 0, f"-r/--root must be 0 or more, got {cfg.root}"),
        (cfg.repeat >= 1, f"--repeat must be at least 1, got {cfg.repeat}"),
        (not (cfg.cudagraph and cfg.blocking), "-G/--cudagraph cannot be combined with -z/--blocking 1"),
    ]
    for ok, message in rules:
        if not ok:
            raise UserError(message)
    check_number(cfg.min_time_s, "--min-time", 0, MAX_MIN_TIME_S)
    for flag, value, low, high in (("-n/--iters", cfg.iters, 1, MAX_ITERS), ("-w/--warmup", cfg.warmup, 0, MAX_WARMUP),
                                   ("--repeat", cfg.repeat, 1, MAX_REPEAT), ("-c/--check", cfg.check, 0, MAX_ITERS)):
        check_number(value, flag, low, high)


@dataclass
class P2PConfig:
    """The pairwise matrix: unidirectional and bidirectional bandwidth and latency for every pair."""

    size_bytes: int = 32 * 1024**2
    iters: int = 20
    warmup: int = 5
    latency_iters: int = 100
    latency_bytes: int = 16
    """p2pBandwidthLatencyTest times one int4 (16 bytes)."""
    run: RunOptions = field(default_factory=RunOptions)

    def validated(self) -> P2PConfig:
        """A checked copy; raises UserError on the first bad value."""
        if self.size_bytes < 1:
            raise UserError(f"must be at least 1 byte, got {self.size_bytes}", field="size")
        check_size_cap(self.size_bytes, "--size")
        if self.iters < 1 or self.latency_iters < 1:
            raise UserError("-n/--iters and --latency-iters must be at least 1")
        for flag, value, low, high in (("-n/--iters", self.iters, 1, MAX_ITERS),
                                       ("-w/--warmup", self.warmup, 0, MAX_WARMUP),
                                       ("--latency-iters", self.latency_iters, 1, MAX_ITERS)):
            check_number(value, flag, low, high)
        if self.warmup < 0:
            raise UserError(f"must be 0 or more, got {self.warmup}", field="warmup")
        return replace(self, run=self.run.validated())
