"""Upper bounds on every numeric input, in one place: what a real job could need, and no more.

A value past its bound is a typo or a probe for a hang (`-n 99999999999999999999999`, `--min-time 1e9`,
`--nproc 1000` on a laptop), refused with one line naming the flag before anything runs. NaN and infinity are
refused everywhere a number is asked for.
"""

from __future__ import annotations

import math

from linkscope.hardware.errors import UserError

MAX_ITERS = 1_000_000
"""Timed operations or steps per size or repeat: nccl-tests' own sweeps use 20 to a few thousand."""
MAX_WARMUP = 100_000
MAX_REPEAT = 1_000
MAX_MIN_TIME_S = 3600.0
"""`--min-time`: an hour per size is already a soak test."""
MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""`--timeout`: a week without progress is no longer a timeout."""
MAX_BUCKET_MB = 16_384.0
"""`--bucket-mb`: 16 GB, larger than any model's gradients that fit one host."""
MAX_PROFILE_STEPS = 1_000
OVERSUBSCRIBE_FACTOR = 4
"""With `--oversubscribe`, local CPU ranks may reach this many per core (and no more)."""
MAX_PRICE_PER_HOUR = 100_000.0
"""Above any rentable unit (a full TPU v5p pod slice is listed near $7,600/h); more is a corrupt field, in a
refreshed catalog and a user's catalog file alike."""
MAX_BUDGET_USD = 1e12
"""`--budget`: more than any job's cost; 1e308 would overflow the sums it is compared with."""
MAX_LIST_ROWS = 1_000_000_000
"""`--limit` of the listing commands: any store holds fewer runs, and SQLite takes no integer past 2**63."""
MAX_GPUS = 131_072
"""GPUs in one job: above the largest clusters built (about 100,000 GPUs); the catalog's offerings are far smaller."""
MAX_TOKENS = 1e15
"""Training tokens: well above the largest published pre-training runs (Llama 3: about 1.5e13 tokens)."""
HOST_BYTES_PER_MESSAGE = 3
"""A rank of a CPU sweep holds about this many buffers of the largest message (input, output, check)."""


def check_number(value: float | None, flag: str, low: float, high: float, *, low_open: bool = False) -> None:
    """`value` (when given) is finite and within [low, high] (or (low, high] with `low_open`); else UserError."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{flag} must be a finite number, got {value}")
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        lower = f"more than {low:g}" if low_open else f"at least {low:g}"
        shown = f"{value:g}" if isinstance(value, float) else str(value)[:40]
        raise UserError(f"{flag} must be {lower} and at most {high:g}, got {shown}")


def check_local_ranks(nproc: int, backend: str, cores: int, gpus: int, oversubscribe: bool) -> None:
    """Local ranks fit what this machine has: one per GPU with nccl; one per core on CPU unless oversubscribed."""
    if backend == "nccl":
        if nproc > gpus:
            raise UserError(f"--nproc {nproc} is more than the {gpus} visible GPUs")
        return
    limit = cores * OVERSUBSCRIBE_FACTOR if oversubscribe else cores
    if nproc > limit:
        hint = (f"--oversubscribe allows up to {OVERSUBSCRIBE_FACTOR} per core ({limit})" if oversubscribe
                else f"pass --oversubscribe to run more CPU ranks than cores (up to {cores * OVERSUBSCRIBE_FACTOR})")
        raise UserError(f"--nproc {nproc} is more than the {cores} CPU cores here; {hint}")


def check_host_memory(need_bytes: float, available_bytes: float | None, what: str) -> None:
    """Refuse a CPU run whose buffers would not fit the memory the host can still give."""
    if available_bytes is not None and need_bytes > available_bytes:
        raise UserError(f"{what} needs about {need_bytes / 2**30:,.1f} GiB of host memory, but only "
                        f"{available_bytes / 2**30:,.1f} GiB is available")


MAX_IMBALANCE = 1000.0
"""Largest routing imbalance (the hottest expert rank's load over the mean) an MoE input may state."""


def check_imbalance(value: float, flag: str) -> float:
    """`value` if it is a routing imbalance (busiest rank's load over the mean, 1 to MAX_IMBALANCE), else a
    UserError naming `flag`."""
    if not math.isfinite(value) or not 1.0 <= value <= MAX_IMBALANCE:
        raise UserError(f"{flag} must be between 1 and {MAX_IMBALANCE:g}, the hottest rank's load over the "
                        f"mean (got {value})")
    return value
