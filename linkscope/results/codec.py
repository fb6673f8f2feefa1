"""Records <-> SQLite rows: which fields are JSON columns and how each record maps onto its table."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, fields
from typing import Any

from linkscope.results.records import CollectiveRow, PairRow, RunInfo

RUN_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RunInfo))
RUN_JSON_FIELDS = frozenset({"hosts", "versions", "nccl_env", "system", "config", "groups", "extra"})
ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CollectiveRow))
ROW_JSON_FIELDS = frozenset({"times_us", "iter_stats"})
PAIR_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(PairRow))


def encode(name: str, value: Any, json_fields: frozenset[str]) -> Any:
    """One field's column value: JSON text for JSON fields; non-finite floats refused."""
    if name in json_fields:
        return None if value is None else json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, float) and not math.isfinite(value):
        # SQLite stores NaN as NULL, which would fail NOT NULL columns far from the cause.
        raise ValueError(f"{name} is {value}; only finite numbers can be stored")
    return value


def run_field(name: str, value: Any) -> Any:
    """One RunInfo field's column value."""
    return encode(name, value, RUN_JSON_FIELDS)


def run_values(info: RunInfo) -> dict[str, Any]:
    """A RunInfo as column -> value, JSON fields encoded."""
    return {k: encode(k, v, RUN_JSON_FIELDS) for k, v in asdict(info).items()}


def run_from_row(row: Any) -> RunInfo:
    """A `runs` table row as a RunInfo."""
    values = {k: row[k] for k in RUN_FIELDS}
    for k in RUN_JSON_FIELDS:
        values[k] = None if values[k] is None else json.loads(values[k])
    return RunInfo(**values)


def row_values(row: CollectiveRow) -> dict[str, Any]:
    """A CollectiveRow as column -> value, JSON fields encoded."""
    return {k: encode(k, v, ROW_JSON_FIELDS) for k, v in asdict(row).items()}


def row_from_db(row: Any) -> CollectiveRow:
    """A `collective_rows` table row as a CollectiveRow."""
    values = {k: row[k] for k in ROW_FIELDS}
    for k in ROW_JSON_FIELDS:
        values[k] = json.loads(values[k])
    return CollectiveRow(**values)


def pair_values(row: PairRow) -> dict[str, Any]:
    """A PairRow as column -> value."""
    return {k: encode(k, v, frozenset()) for k, v in asdict(row).items()}


def pair_from_db(row: Any) -> PairRow:
    """A `pair_rows` table row as a PairRow."""
    return PairRow(**{k: row[k] for k in PAIR_FIELDS})


def insert_sql(table: str, columns: tuple[str, ...]) -> str:
    """`INSERT INTO table (run_id, columns...) VALUES (?, ...)` with named parameters."""
    names = ("run_id",) + tuple(c for c in columns if c != "run_id")
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(':' + n for n in names)})"
