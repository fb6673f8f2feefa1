"""Reading SkyPilot catalog files for `catalog refresh`: every row validated, every rejected row kept with its reason.

SkyPilot's catalog (github.com/skypilot-org/skypilot-catalog) keeps one `vms.csv` per cloud under
`catalogs/v<N>/<cloud>/`. A row names an instance type (InstanceType) or, on clouds that bill GPUs apart from the
VM (GCP), only an accelerator (AcceleratorName, AcceleratorCount); Price and SpotPrice are USD per hour.
"""

from __future__ import annotations

import csv
import io
import math
import re
import subprocess
import urllib.request
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from linkscope.hardware.errors import DataError, UserError

MAX_PRICE_PER_HOUR = 100_000.0
"""Above any rentable unit (a full TPU v5p pod slice is listed near $7,600/h); more is a corrupt field."""
MAX_SOURCE_BYTES = 64 * 1024 * 1024
"""The largest vms.csv read (SkyPilot's biggest, GCP's, is about 2 MB)."""
MARKETPLACE_CLOUDS = frozenset({"shadeform", "vast"})
"""SkyPilot clouds whose rows are marketplace listings rather than a provider's own price list."""
_VERSION = re.compile(r"^v(\d+)$")


@dataclass(frozen=True)
class CatalogRow:
    """One priced row of a SkyPilot catalog file."""

    cloud: str
    instance: str
    accelerator: str
    accelerator_count: str
    region: str
    price: float | None
    spot_price: float | None
    line: int

    @property
    def key(self) -> str:
        """`cloud/InstanceType`, or `cloud/gpu:NAME:COUNT` for a GPU-only row."""
        if self.instance:
            return f"{self.cloud}/{self.instance}"
        return f"{self.cloud}/gpu:{self.accelerator}:{self.accelerator_count}"


@dataclass(frozen=True)
class RejectedRow:
    """A row that cannot be used, where it is and why."""

    origin: str
    line: int
    reason: str
    blocking: bool = True
    """A blocking rejection (a malformed or impossible price) stops the refresh; a zero price only drops its row."""

    def __str__(self) -> str:
        return f"{self.origin}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class SourceFile:
    """Where one cloud's rows came from: path inside the catalog, version, repository commit and its date."""

    cloud: str
    path: str
    version: int | None
    commit: str | None = None
    commit_date: date | None = None

    def describe(self) -> str:
        """`SkyPilot catalog v8 gcp/vms.csv (skypilot-org/skypilot-catalog commit 006059e0, 2026-11-30)`."""
        version = f"v{self.version} " if self.version is not None else ""
        where = f"commit {self.commit[:8]}" if self.commit else "commit not recorded"
        when = f", {self.commit_date}" if self.commit_date else ""
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


def _price(text: str | None, column: str, origin: str, line: int) -> tuple[float | None, RejectedRow | None]:
    raw = (text or "").strip()
    if not raw:
        return None, None
    try:
        value = float(raw)
    except ValueError:
        return None, RejectedRow(origin, line, f"{column} '{raw[:40]}' is not a number")
    if not math.isfinite(value):
        return None, RejectedRow(origin, line, f"{column} {raw[:40]} is not a finite number")
    if value < 0:
        return None, RejectedRow(origin, line, f"{column} {raw[:40]} is negative")
    if value == 0:
        return None, RejectedRow(origin, line, f"{column} is 0 (not a price; row skipped)", blocking=False)
    if value > MAX_PRICE_PER_HOUR:
        return None, RejectedRow(origin, line, f"{column} {raw[:40]} is above ${MAX_PRICE_PER_HOUR:,.0f}/h")
    return value, None


def parse_csv(text: str, cloud: str, origin: str, into: CatalogSource | None = None) -> CatalogSource:
    """Validate every row of one `vms.csv`; usable rows and rejected rows (with the reason) both come back."""
    out = into or CatalogSource()
    reader = csv.DictReader(io.StringIO(text))
    try:
        columns = reader.fieldnames or []
        missing = [c for c in ("InstanceType", "Price") if c not in columns]
        if missing:
            raise DataError(origin, f"not a SkyPilot vms.csv (missing column {', '.join(missing)})")
        for raw in reader:
            line = reader.line_num
            instance = (raw.get("InstanceType") or "").strip()
            accelerator = (raw.get("AcceleratorName") or "").strip()
            price, bad_price = _price(raw.get("Price"), "Price", origin, line)
            spot, bad_spot = _price(raw.get("SpotPrice"), "SpotPrice", origin, line)
            out.rejected += [r for r in (bad_price, bad_spot) if r is not None]
            if bad_price is not None and bad_price.blocking:
                continue
            if (instance or accelerator) and (price is not None or spot is not None):
                count = (raw.get("AcceleratorCount") or "").strip().removesuffix(".0")
                out.rows.append(CatalogRow(cloud, instance, accelerator, count, (raw.get("Region") or "").strip(),
                                           price, spot, line))
    except csv.Error as exc:
        raise DataError(origin, f"line {reader.line_num}: not readable as CSV ({exc})") from None
    return out


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            raise DataError(str(path), f"larger than {MAX_SOURCE_BYTES // 2**20} MiB; not a SkyPilot vms.csv")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(str(path), f"cannot read the catalog file ({exc})") from None


def parse_as_of(text: str | None) -> date | None:
    """`--as-of YYYY-MM-DD`: a real date, not in the future."""
    if text is None:
        return None
    try:
        when = date.fromisoformat(text.strip())
    except ValueError:
        raise UserError(f"--as-of: '{text[:40]}' is not a date (YYYY-MM-DD)", field="as-of") from None
    if when > date.today():
        raise UserError(f"--as-of: {when} is in the future", field="as-of")
    return when


def version_of(folder: str) -> int:
    """`v10` -> 10; versions compare as numbers, so v10 is newer than v9."""
    m = _VERSION.match(folder)
    if not m:
        raise UserError(f"catalog version folder '{folder}' is not v<number> (as in catalogs/v8/gcp/vms.csv)",
                        field="from")
    return int(m.group(1))


def _git_commit(directory: Path) -> tuple[str | None, date | None]:
    """The commit and commit date of a skypilot-catalog checkout holding `directory`, else (None, None).

    Only a checkout with `catalogs/` at its top counts: a sample copied into another repository must not be dated
    by that repository's commits."""
    try:
        top = subprocess.run(["git", "-C", str(directory), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=30, check=False)
        if top.returncode != 0 or not (Path(top.stdout.strip()) / "catalogs").is_dir():
            return None, None
        done = subprocess.run(["git", "-C", str(directory), "log", "-1", "--format=%H %cs", "--", "."],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None, None
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 2:
        return None, None
    try:
        return parts[0], date.fromisoformat(parts[1])
    except ValueError:
        return None, None


def _read_tree(path: Path, known_clouds: set[str], commit: str | None, as_of: date | None) -> CatalogSource:
    files = sorted(path.rglob("vms.csv"))
    if not files:
        raise UserError(f"no */vms.csv under {path}", field="from")
    newest: dict[str, tuple[int, Path]] = {}
    for f in files:
        cloud, version = f.parent.name.lower(), version_of(f.parent.parent.name)
        if cloud not in newest or version > newest[cloud][0]:
            newest[cloud] = (version, f)
    out = CatalogSource()
    git_commit, git_date = _git_commit(path)
    for cloud, (version, f) in sorted(newest.items()):
        if cloud not in known_clouds:
            out.skipped_clouds.append(cloud)
            continue
        relative = f.relative_to(path).as_posix()
        out.files[cloud] = SourceFile(cloud, relative, version, commit or git_commit, as_of or git_date)
        parse_csv(_read(f), cloud, relative, out)
    return out


def read_catalog(source: str, known_clouds: set[str], cloud: str | None = None, commit: str | None = None,
                 as_of: date | None = None) -> CatalogSource:
    """Every row under a directory laid out like skypilot-catalog (newest version per cloud), or of one CSV or URL.

    A single file of a cloud linkscope does not know is an error; in a tree, such clouds are listed as skipped."""
    if source.startswith(("http://", "https://")):
        name = cloud or _cloud_of(source)
        _known(name, known_clouds)
        try:
            with urllib.request.urlopen(source, timeout=60) as response:  # user-given http(s) URL
                text = response.read(MAX_SOURCE_BYTES + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"cannot download {source} ({exc})", field="from") from None
        if len(text) > MAX_SOURCE_BYTES:
            raise UserError(f"{source} is larger than {MAX_SOURCE_BYTES // 2**20} MiB", field="from")
        out = parse_csv(text, name, source)
        out.files[name] = SourceFile(name, source, _url_version(source), commit, as_of)
        return out
    path = Path(source).expanduser()
    if path.is_dir():
        return _read_tree(path, known_clouds, commit, as_of)
    if path.is_file():
        name = cloud or _cloud_of(str(path.resolve()))
        _known(name, known_clouds)
        out = parse_csv(_read(path), name, str(path))
        git_commit, git_date = _git_commit(path.parent)
        out.files[name] = SourceFile(name, path.name, _url_version(str(path.resolve())), commit or git_commit,
                                     as_of or git_date)
        return out
    raise UserError(f"{source} is neither a directory, a CSV file nor an http(s) URL", field="from")


def _known(cloud: str, known_clouds: set[str]) -> None:
    if cloud not in known_clouds:
        raise UserError(f"unknown provider '{cloud}' (linkscope has offerings for: {', '.join(sorted(known_clouds))}); "
                        "name it with --cloud", field="cloud")


def _cloud_of(path: str) -> str:
    """`catalogs/v7/aws/vms.csv` -> `aws`: the directory holding the file."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    return parts[-2].lower() if len(parts) >= 2 else "unknown"


def _url_version(path: str) -> int | None:
    """The catalog version of a file path or URL (`.../catalogs/v8/gcp/vms.csv` -> 8), None when there is none."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if len(parts) >= 3 and _VERSION.match(parts[-3]):
        return int(parts[-3][1:])
    return None
