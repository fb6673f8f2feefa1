"""What a run is made of: its metadata, its collective rows and its pairwise rows.

Plain dataclasses shared by `bench` (which produces them), `results.store` (which keeps them), the
nccl-tests importer, `model.calibrate` and `report`. Field names follow nccl-tests where they mirror it
(`time` in µs as `time_us`, `algbw`/`busbw` in GB/s, `nwrong`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

RunStatus = Literal["running", "complete", "incomplete", "failed"]
RunKind = Literal["bench", "p2p", "import", "check", "train", "moe", "kv"]
RUN_KINDS: tuple[str, ...] = get_args(RunKind)
NOT_A_SWEEP = {"train": "a training run", "p2p": "a p2p matrix", "moe": "a MoE dispatch/combine run",
               "kv": "a KV-cache transfer run"}
"""Kinds of run that hold no collective sweep, as an error message names them."""
Placement = Literal["out_of_place", "in_place"]


@dataclass
class RunInfo:
    """One run's metadata. `system` is the probed System as `hardware.serialize.system_dict` writes it."""

    kind: RunKind
    label: str = ""
    run_id: str = ""
    started_at: str = ""
    """ISO 8601, UTC."""
    ended_at: str | None = None
    status: RunStatus = "running"
    hosts: list[str] = field(default_factory=list)
    world_size: int = 0
    nodes: int = 1
    backend: str = ""
    """`gloo`, `nccl`, or `nccl-tests` for imports."""
    versions: dict[str, str] = field(default_factory=dict)
    """torch, nccl, cuda, driver, python, linkscope; what is known."""
    nccl_env: dict[str, str] = field(default_factory=dict)
    system: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    """The options the run was started with (sizes, iters, dtype, op, ...)."""
    groups: dict[str, Any] = field(default_factory=dict)
    """Rank layout: host per rank, local rank, intra- and inter-node groups."""
    command: str = ""
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else worth keeping: NCCL transport summary, import warnings, ..."""
    launcher_pid: int | None = None
    """The process that created the run; a `running` run whose launcher is gone is marked incomplete."""
    launcher_host: str | None = None
    source_sha256: str | None = None
    """For imports: the hash of the imported file's content, so a second import of it is recognised."""


@dataclass
class CollectiveRow:
    """One size of one collective, one placement (out-of-place or in-place), as nccl-tests prints it.

    With `--repeat K` the sweep runs K times; `time_us` is the mean over repeats and the min/max/stdev
    fields describe the spread. algbw and busbw are computed from `time_us` (GB/s, 10^9 bytes/s).
    """

    op: str
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int
    placement: Placement
    time_us: float
    algbw: float
    busbw: float
    nwrong: int | None
    """Wrong elements summed over ranks; None where not checked (nccl-tests prints N/A)."""
    world_size: int = 0
    iters: int = 0
    repeats: int = 1
    time_us_min: float | None = None
    time_us_max: float | None = None
    time_us_stdev: float | None = None
    times_us: list[float] = field(default_factory=list)
    """Per-repeat times, in repeat order."""
    max_error: float | None = None
    """nccl-tests before 2.13 printed the largest deviation from the expected result (`error` column) instead of
    counting wrong elements; imports of such output keep it here and leave `nwrong` None."""
    iter_stats: dict[str, float] = field(default_factory=dict)
    """Per-iteration statistics (nccl-tests `-I`), keyed as nccl-tests' JSON does: min_us, max_us, p99_us, cv_pct."""
    nccl_algo: str | None = None
    """What NCCL chose for this size (its `NCCL_DEBUG_SUBSYS=TUNING` line), upper case as NCCL 2.2x prints it:
    RING, TREE, NVLS, NVLS_TREE, COLLNET_DIRECT, COLLNET_CHAIN, PAT. None where NCCL did not say (gloo, imports)."""
    nccl_proto: str | None = None
    """LL, LL128 or SIMPLE."""
    nccl_channels: int | None = None
    """Channels the collective ran on (`channel{Lo..Hi}`: Hi - Lo + 1); None where the log line does not say."""


@dataclass
class PairRow:
    """Point-to-point figures between two ranks (the `linkscope p2p` matrix, one cell)."""

    src: int
    dst: int
    size_bytes: int
    uni_gb_per_s: float | None
    """src -> dst alone."""
    bi_gb_per_s: float | None
    """src <-> dst at once, both directions added (as p2pBandwidthLatencyTest reports)."""
    latency_us: float | None
    """One small message src -> dst, half a round trip."""


def bi_below_one_way(rows: list[PairRow]) -> set[tuple[int, int]]:
    """The ordered pairs whose bidirectional figure (both directions at once, added) is below one direction
    alone: the two directions contended for something (on gloo, the host's cores), so the figure says nothing
    about the link. Printed flagged, never as if it were a link's bidirectional bandwidth."""
    uni = {(r.src, r.dst): r.uni_gb_per_s for r in rows}
    flagged = set()
    for r in rows:
        one_way = [v for v in (uni.get((r.src, r.dst)), uni.get((r.dst, r.src))) if v is not None]
        if r.bi_gb_per_s is not None and one_way and r.bi_gb_per_s < max(one_way):
            flagged.add((r.src, r.dst))
    return flagged
