"""Writing a refresh: the applied prices merged, per offering, into `prices-skypilot.yaml` in the config directory.

A refresh only adds knowledge. Entries of offerings it was not given (another cloud's corrections from an earlier
refresh) are kept as they are; an entry it replaces is named with its old and new price and date. Every entry is
validated as the loader will validate it before anything is written, and the file is replaced atomically.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import USER_DIR_ENV, read_yaml
from linkscope.hardware.refresh import PriceChange, RefreshReport
from linkscope.hardware.schema import CATALOG_FILE, COMMIT, PriceOverride

OVERRIDE_FILE = "prices-skypilot.yaml"
_HEADER = ("# Written by `linkscope catalog refresh`. Applied over linkscope's shipped prices; each refresh merges its "
           "prices in per offering.\n# Delete an entry (or the file) to go back to the shipped price.\n")


class _NoAliasDumper(yaml.SafeDumper):
    """Writes repeated values (the same date object) in full instead of as YAML anchors."""

    def ignore_aliases(self, data: object) -> bool:
        return True


@dataclass
class Merged:
    """What a write did to the override file, entry by entry."""

    path: Path
    added: list[tuple[PriceChange, dict[str, Any]]] = field(default_factory=list)
    """Offerings with no entry before: the change (the shipped price as old) and the new entry."""
    replaced: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    """(old entry, new entry) for offerings the file already had."""
    kept: list[dict[str, Any]] = field(default_factory=list)
    """Entries this refresh was not given, left as they were."""


def override_dir() -> Path:
    """$LINKSCOPE_CONFIG_DIR, else the platform's config directory for linkscope."""
    configured = os.environ.get(USER_DIR_ENV)
    if configured:
        return Path(configured)
    from platformdirs import user_config_dir

    return Path(user_config_dir("linkscope"))


def _entry(c: PriceChange) -> dict[str, Any]:
    entry: dict[str, Any] = {"offering": c.offering}
    if c.new_price is not None:
        entry["price_per_hour"] = c.new_price
    if c.new_spot is not None:
        entry["spot_price_per_hour"] = c.new_spot
    entry["price_as_of"] = c.as_of
    entry["price_source"] = f"{c.source}: {c.rows}, {c.region or 'no region'}"
    entry["price_source_kind"] = c.kind
    if c.file is not None and c.file.commit and re.match(COMMIT, c.file.commit) and re.match(CATALOG_FILE,
                                                                                            c.file.path):
        entry["price_source_file"] = c.file.path
        entry["price_source_commit"] = c.file.commit
    entry["currency"] = c.currency
    if c.region:
        entry["regions"] = [c.region]
    try:
        PriceOverride.model_validate(entry)
    except ValidationError as exc:  # a bug upstream, never a reason to write a file that breaks every command
        raise UserError(f"refusing to write {c.offering}: {exc.errors()[0]['msg']}") from None
    return entry


def override_entries(report: RefreshReport) -> list[tuple[PriceChange, dict[str, Any]]]:
    """The applied prices as `price_overrides` entries, each validated as the loader will validate it."""
    return [(c, _entry(c)) for c in report.changes if c.applied and c.as_of is not None]


def _existing(path: Path) -> list[dict[str, Any]]:
    """The entries already in the override file; a file that cannot be merged into safely stops the write."""
    if not path.exists():
        return []
    fix = f"; fix it or move it away (mv '{path}' '{path}.bak') and refresh again"
    try:
        doc = read_yaml(path)
    except DataError as exc:
        raise UserError(f"cannot merge into {path}: {exc}{fix}", field="LINKSCOPE_CONFIG_DIR") from None
    raw = (doc or {}).get("price_overrides") if isinstance(doc, dict) else None
    if doc is not None and (not isinstance(doc, dict) or set(doc) - {"price_overrides"} or not isinstance(
            raw if raw is not None else [], list)):
        raise UserError(f"cannot merge into {path}: not a price_overrides file{fix}", field="LINKSCOPE_CONFIG_DIR")
    entries: list[dict[str, Any]] = list(raw or [])
    seen: set[str] = set()
    for item in entries:
        try:
            offering = PriceOverride.model_validate(item).offering
        except ValidationError as exc:
            raise UserError(f"cannot merge into {path}: an entry is invalid ({exc.errors()[0]['msg']}){fix}",
                            field="LINKSCOPE_CONFIG_DIR") from None
        if offering in seen:
            raise UserError(f"cannot merge into {path}: {offering} is listed twice{fix}",
                            field="LINKSCOPE_CONFIG_DIR")
        seen.add(offering)
    return entries


def merge(existing: list[dict[str, Any]], new: list[tuple[PriceChange, dict[str, Any]]], path: Path) -> tuple[
        list[dict[str, Any]], Merged]:
    """The merged entries (existing order, new offerings appended) and what happened to each."""
    result = Merged(path)
    by_offering = {c.offering: (c, e) for c, e in new}
    merged: list[dict[str, Any]] = []
    for old in existing:
        if old["offering"] in by_offering:
            _, entry = by_offering.pop(old["offering"])
            result.replaced.append((old, entry))
            merged.append(entry)
        else:
            result.kept.append(old)
            merged.append(old)
    for change, entry in by_offering.values():
        result.added.append((change, entry))
        merged.append(entry)
    return merged, result


def _write_atomically(path: Path, text: str) -> None:
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".prices-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror or exc})", field="LINKSCOPE_CONFIG_DIR") from None


def write_overrides(report: RefreshReport, directory: Path | None = None) -> Merged:
    """Merge the applied prices into the override file atomically: a reader sees the old file or the new one."""
    path = (directory or override_dir()) / OVERRIDE_FILE
    if report.blocking:
        raise UserError(f"{len(report.blocking)} rejected row(s) in the source; nothing written")
    entries, merged = merge(_existing(path), override_entries(report), path)
    text = _HEADER + yaml.dump({"price_overrides": entries}, Dumper=_NoAliasDumper, sort_keys=False, width=120)
    _write_atomically(path, text)
    return merged
