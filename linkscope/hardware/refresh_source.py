"""Reading SkyPilot catalog files for `catalog refresh`: every row validated, every file dated by its own source.

SkyPilot's catalog (github.com/skypilot-org/skypilot-catalog) keeps one `vms.csv` per cloud under
`catalogs/v<N>/<cloud>/`. A tree holds files of many commits, so each file is dated on its own: in a git checkout
by the last commit that changed it (`git log -1 -- <file>`), else by the date the user states for it
(`--as-of CLOUD=YYYY-MM-DD`), else it is undated, and an undated price never replaces a dated one.
"""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.git_dates import checkout_top, file_date
from linkscope.hardware.refresh_rows import CatalogRow, RejectedRow, parse_csv

MAX_SOURCE_BYTES = 64 * 1024 * 1024
"""The largest vms.csv read (SkyPilot's biggest, GCP's, is about 2 MB)."""
MARKETPLACE_CLOUDS = frozenset({"shadeform", "vast"})
"""SkyPilot clouds whose rows are marketplace listings rather than a provider's own price list."""
SOURCE_CURRENCIES = {"seeweb": "EUR"}
"""Clouds whose SkyPilot Price column is not USD: SkyPilot's Seeweb fetcher (sky/catalog/data_fetchers/fetch_seeweb.py)
copies the hourly_price of Seeweb's API, in euros, without converting it. Every other cloud's rows are USD."""


def source_currency(cloud: str) -> str:
    """The currency of a SkyPilot cloud's Price and SpotPrice columns."""
    return SOURCE_CURRENCIES.get(cloud, "USD")
_VERSION = re.compile(r"^v(\d+)$")
_COMMIT = re.compile(r"^[0-9a-fA-F]{7,40}$")


@dataclass(frozen=True)
class SourceFile:
    """Where one cloud's rows came from: path inside the catalog, version, commit and the file's own date."""

    cloud: str
    path: str
    version: int | None
    commit: str | None = None
    commit_date: date | None = None
    """The file's date: its last commit in a git checkout, else the date the user stated; None when undated."""
    dated_by: str = "undated"
    """`git` (the file's last commit), `stated` (--as-of) or `undated`; when undated, why."""

    def describe(self) -> str:
        """`SkyPilot catalog v8 gcp/vms.csv (skypilot-org/skypilot-catalog commit 006059e0, 2026-11-30)`."""
        version = f"v{self.version} " if self.version is not None else ""
        where = f"commit {self.commit[:8]}" if self.commit else "commit not recorded"
        when = f", {self.commit_date}" if self.commit_date else ", undated"
        return f"SkyPilot catalog {version}{self.cloud}/vms.csv (skypilot-org/skypilot-catalog {where}{when})"


@dataclass
class CatalogSource:
    """Every row read, every row rejected, and the files they came from."""

    rows: list[CatalogRow] = field(default_factory=list)
    rejected: list[RejectedRow] = field(default_factory=list)
    files: dict[str, SourceFile] = field(default_factory=dict)
    """By cloud."""
    skipped_clouds: list[str] = field(default_factory=list)
    """Clouds in a catalog tree that linkscope has no offerings for."""
    notes: list[str] = field(default_factory=list)
    """What the reader decided about dates and commits (a stated date that git overrides)."""
    checkout: Path | None = None
    """The top of the skypilot-catalog git checkout the files came from, when they came from one."""


@dataclass(frozen=True)
class Stated:
    """What the user states about the source files: per cloud, or one value (`*`) for a single file."""

    dates: dict[str, date] = field(default_factory=dict)
    commits: dict[str, str] = field(default_factory=dict)

    def date_for(self, cloud: str) -> date | None:
        return self.dates.get(cloud, self.dates.get("*"))

    def commit_for(self, cloud: str) -> str | None:
        return self.commits.get(cloud, self.commits.get("*"))


def _split(text: str, option: str) -> tuple[str, str]:
    """`lambda=2026-11-30` -> ('lambda', '2026-11-30'); a bare value applies to a single file (`*`)."""
    if "=" not in text:
        return "*", text.strip()
    cloud, _, value = text.partition("=")
    if not re.fullmatch(r"[a-z0-9-]+", cloud.strip().lower()):
        raise UserError(f"{option}: '{text[:40]}' is not CLOUD=VALUE", field=option.lstrip("-"))
    return cloud.strip().lower(), value.strip()


def parse_stated(as_of: list[str] | None, commits: list[str] | None) -> Stated:
    """`--as-of [CLOUD=]YYYY-MM-DD` and `--commit [CLOUD=]HASH`, each repeatable: real past dates, hex commits."""
    dates: dict[str, date] = {}
    for text in as_of or []:
        cloud, value = _split(text, "--as-of")
        try:
            when = date.fromisoformat(value)
        except ValueError:
            raise UserError(f"--as-of: '{value[:40]}' is not a date (YYYY-MM-DD)", field="as-of") from None
        if when > date.today():
            raise UserError(f"--as-of: {when} is in the future", field="as-of")
        if cloud in dates and dates[cloud] != when:
            raise UserError(f"--as-of: two dates for {cloud}", field="as-of")
        dates[cloud] = when
    hashes: dict[str, str] = {}
    for text in commits or []:
        cloud, value = _split(text, "--commit")
        if not _COMMIT.match(value):
            raise UserError(f"--commit: '{value[:40]}' is not a git commit hash", field="commit")
        hashes[cloud] = value.lower()
    return Stated(dates, hashes)


def version_of(folder: str) -> int:
    """`v10` -> 10; versions compare as numbers, so v10 is newer than v9."""
    m = _VERSION.match(folder)
    if not m:
        raise UserError(f"catalog version folder '{folder}' is not v<number> (as in catalogs/v8/gcp/vms.csv)",
                        field="from")
    return int(m.group(1))


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            raise DataError(str(path), f"larger than {MAX_SOURCE_BYTES // 2**20} MiB; not a SkyPilot vms.csv")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(str(path), f"cannot read the catalog file ({exc})") from None


def _dated(cloud: str, path: Path, relative: str, version: int | None, top: Path | None, stated: Stated,
           out: CatalogSource) -> SourceFile:
    """The file dated by git when it can be, else by what the user states for it, else undated (and why)."""
    said_date, said_commit = stated.date_for(cloud), stated.commit_for(cloud)
    why = "no date stated (--as-of CLOUD=YYYY-MM-DD) and not in a skypilot-catalog git checkout"
    if top is not None:
        found = file_date(top, path)
        if found.when is not None:
            if said_date is not None and said_date != found.when:
                out.notes.append(f"{cloud}: --as-of {said_date} not used; git dates {relative} {found.when} "
                                 f"(commit {(found.commit or '')[:8]})")
            return SourceFile(cloud, relative, version, found.commit, found.when, "git")
        why = f"{found.why_undated} and no date stated"
        said_commit = said_commit or found.commit
    if said_date is not None:
        return SourceFile(cloud, relative, version, said_commit, said_date, "stated")
    return SourceFile(cloud, relative, version, said_commit, None, f"undated: {why}")


def _read_tree(path: Path, known_clouds: set[str], stated: Stated) -> CatalogSource:
    files = sorted(path.rglob("vms.csv"))
    if not files:
        raise UserError(f"no */vms.csv under {path}", field="from")
    newest: dict[str, tuple[int, Path]] = {}
    for f in files:
        cloud, version = f.parent.name.lower(), version_of(f.parent.parent.name)
        if cloud not in newest or version > newest[cloud][0]:
            newest[cloud] = (version, f)
    out = CatalogSource(checkout=checkout_top(path))
    read = [(cloud, version, f) for cloud, (version, f) in sorted(newest.items()) if cloud in known_clouds]
    out.skipped_clouds = sorted(c for c in newest if c not in known_clouds)
    _no_single_value(stated, len(read))
    for cloud, version, f in read:
        relative = f.relative_to(path).as_posix()
        out.files[cloud] = _dated(cloud, f, relative, version, out.checkout, stated, out)
        parsed = parse_csv(_read(f), cloud, relative)
        out.rows += parsed.rows
        out.rejected += parsed.rejected
    unknown = sorted(set(stated.dates) - set(out.files) - {"*"})
    if unknown:
        out.notes.append(f"--as-of names {', '.join(unknown)}, which this source does not hold")
    return out


def _no_single_value(stated: Stated, files: int) -> None:
    """One bare date for several files would date files of many commits alike: the very mistake to avoid."""
    if files > 1 and ("*" in stated.dates or "*" in stated.commits):
        raise UserError(f"the source holds {files} files, each from its own commit: give --as-of CLOUD=YYYY-MM-DD "
                        "(and --commit CLOUD=HASH) per file, or refresh from a git checkout", field="as-of")


def read_catalog(source: str, known_clouds: set[str], cloud: str | None = None,
                 stated: Stated | None = None) -> CatalogSource:
    """Every row under a directory laid out like skypilot-catalog (newest version per cloud), or of one CSV or URL.

    A single file of a cloud linkscope does not know is an error; in a tree, such clouds are listed as skipped."""
    stated = stated or Stated()
    if source.startswith(("http://", "https://")):
        return _read_url(source, known_clouds, cloud, stated)
    path = Path(source).expanduser()
    if path.is_dir():
        return _read_tree(path, known_clouds, stated)
    if path.is_file():
        name = cloud or _cloud_of(str(path.resolve()))
        _known(name, known_clouds)
        out = CatalogSource(checkout=checkout_top(path.parent))
        out.files[name] = _dated(name, path, _catalog_path(path), _url_version(str(path.resolve())), out.checkout,
                                 stated, out)
        parsed = parse_csv(_read(path), name, str(path))
        out.rows, out.rejected = parsed.rows, parsed.rejected
        return out
    raise UserError(f"{source} is neither a directory, a CSV file nor an http(s) URL", field="from")


def _read_url(source: str, known_clouds: set[str], cloud: str | None, stated: Stated) -> CatalogSource:
    name = cloud or _cloud_of(source)
    _known(name, known_clouds)
    try:
        with urllib.request.urlopen(source, timeout=60) as response:  # user-given http(s) URL
            text = response.read(MAX_SOURCE_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"cannot download {source} ({exc})", field="from") from None
    if len(text) > MAX_SOURCE_BYTES:
        raise UserError(f"{source} is larger than {MAX_SOURCE_BYTES // 2**20} MiB", field="from")
    parsed = parse_csv(text, name, source)
    out = CatalogSource(rows=parsed.rows, rejected=parsed.rejected)
    when, commit = stated.date_for(name), stated.commit_for(name)
    out.files[name] = SourceFile(name, source, _url_version(source), commit, when,
                                 "stated" if when else "undated: no date stated (--as-of YYYY-MM-DD)")
    return out


def _known(cloud: str, known_clouds: set[str]) -> None:
    if cloud not in known_clouds:
        raise UserError(f"unknown provider '{cloud}' (linkscope has offerings for: {', '.join(sorted(known_clouds))}); "
                        "name it with --cloud", field="cloud")


def _cloud_of(path: str) -> str:
    """`catalogs/v7/aws/vms.csv` -> `aws`: the directory holding the file."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    return parts[-2].lower() if len(parts) >= 2 else "unknown"


def _catalog_path(path: Path) -> str:
    """`.../catalogs/v8/lium/vms.csv` -> `catalogs/v8/lium/vms.csv`, its path in skypilot-catalog; else the name."""
    parts = path.resolve().parts
    if len(parts) >= 4 and parts[-4] == "catalogs" and _VERSION.match(parts[-3]):
        return "/".join(parts[-4:])
    return path.name


def _url_version(path: str) -> int | None:
    """The catalog version of a file path or URL (`.../catalogs/v8/gcp/vms.csv` -> 8), None when there is none."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if len(parts) >= 3 and _VERSION.match(parts[-3]):
        return int(parts[-3][1:])
    return None
