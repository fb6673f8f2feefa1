"""Combining `--repeat K` measurements of one size into the row that is stored and exported."""

from __future__ import annotations

import statistics
from dataclasses import replace

from linkscope.results.records import CollectiveRow


def aggregate(samples: list[CollectiveRow]) -> CollectiveRow:
    """One row from the same op, size and placement measured in several repeats.

    time is the mean over repeats; algbw and busbw are recomputed from that mean (they scale as 1/time);
    min, max and the sample standard deviation describe the spread; wrong elements are summed.
    """
    if not samples:
        raise ValueError("nothing to aggregate")
    times = [s.time_us for s in samples]
    mean_us = statistics.fmean(times)
    first = samples[0]
    scale = first.time_us / mean_us if mean_us > 0 else 0.0
    checked = [s.nwrong for s in samples if s.nwrong is not None]
    return replace(
        first,
        time_us=mean_us,
        algbw=first.algbw * scale,
        busbw=first.busbw * scale,
        nwrong=sum(checked) if checked else None,
        iters=max(s.iters for s in samples),
        repeats=len(samples),
        time_us_min=min(times),
        time_us_max=max(times),
        time_us_stdev=statistics.stdev(times) if len(times) > 1 else None,
        times_us=times,
    )
