"""Every refreshed price is dated by its own source file: in a git checkout by the file's last commit (not the
repository's newest), else by what the user states per file, else undated; an undated price never outranks a dated
one, and a shipped price read from a catalog file is dated by that file's commit when the checkout holds it."""

from __future__ import annotations

import os
import subprocess
from datetime import date
from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.hardware.refresh import known_clouds, refresh
from linkscope.hardware.refresh_source import Stated, parse_stated, read_catalog

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
OFFERINGS = """
offerings:
  - {provider: alpha, instance: h100x8, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 24.0,
     price_as_of: 2026-06-01, price_source: "alpha price page", price_source_kind: dataset, source: t,
     as_of: 2026-06-01}
  - {provider: alpha, instance: a100x8, gpu: A100-SXM4-80GB, gpus: 8, scale_up: {kind: nvswitch},
     price_per_hour: 14.0, price_as_of: 2026-12-03, price_date_basis: read, price_source_kind: dataset,
     price_source: "SkyPilot catalog v7 alpha/vms.csv, read 2026-12-03", source: t, as_of: 2026-12-03
     COMMIT}
  - {provider: beta, instance: h100x8, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 26.0,
     price_as_of: 2026-06-01, price_source: "beta price page", price_source_kind: dataset, source: t,
     as_of: 2026-06-01}
"""


def _git(repo: Path, *args: str, when: str = "2026-01-01") -> str:
    stamp = f"{when}T12:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": str(repo.parent)}
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(repo), *args],
                          capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def _write(repo: Path, cloud: str, rows: str, version: str = "v8") -> None:
    path = repo / "catalogs" / version / cloud / "vms.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + rows)


@pytest.fixture()
def checkout(tmp_path: Path) -> tuple[Path, str]:
    """A skypilot-catalog-like repository: alpha's file last changed 2026-03-02, beta's 2026-11-30."""
    repo = tmp_path / "skypilot-catalog"
    repo.mkdir()
    _git(repo, "init", "-q")
    _write(repo, "alpha", "h100x8,H100,8,208,1800,22.0,r1,,\na100x8,A100-80GB,8,96,1000,12.0,r1,,\n")
    _write(repo, "beta", "h100x8,H100,8,208,1800,26.0,r1,,\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "both", when="2026-03-02")
    _write(repo, "beta", "h100x8,H100,8,208,1800,25.0,r1,,\n")
    _git(repo, "commit", "-q", "-am", "beta only", when="2026-11-30")
    return repo, _git(repo, "rev-parse", "HEAD")


def _db(tmp_path: Path, commit: str = ""):
    extra = tmp_path / "offerings.yaml"
    recorded = (f",\n     price_source_file: catalogs/v8/alpha/vms.csv, price_source_commit: {commit}" if commit
                else "")
    extra.write_text(OFFERINGS.replace("\n     COMMIT", recorded))
    return load_db([extra], include_user=False)


def _refresh(db, tree: Path, stated: Stated | None = None):
    return refresh(db, read_catalog(str(tree), known_clouds(db), stated=stated))


def test_each_file_is_dated_by_its_own_last_commit(checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = checkout
    source = read_catalog(str(repo), known_clouds(_db(tmp_path)))
    assert (source.files["alpha"].commit_date, source.files["alpha"].dated_by) == (date(2026, 3, 2), "git")
    assert source.files["beta"].commit_date == date(2026, 11, 30)  # not the date of the newest commit for alpha
    assert source.files["alpha"].commit != source.files["beta"].commit


def test_an_older_file_never_replaces_a_newer_price(checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = checkout
    by_id = {c.offering: c for c in _refresh(_db(tmp_path), repo).changes}
    assert by_id["alpha/h100x8"].held_back == "the current price is newer (2026-06-01 > 2026-03-02)"
    assert by_id["beta/h100x8"].new_price == 25.0 and by_id["beta/h100x8"].applied


def test_a_stated_date_never_overrides_git(checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = checkout
    report = _refresh(_db(tmp_path), repo, parse_stated(["alpha=2026-12-01"], None))
    assert report.source.files["alpha"].commit_date == date(2026, 3, 2)
    assert any("alpha: --as-of 2026-12-01 not used; git dates" in n for n in report.source.notes)


def test_a_changed_file_or_a_shallow_clone_is_undated(checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = checkout
    shallow = tmp_path / "shallow" / "skypilot-catalog"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True,
                   capture_output=True)
    files = read_catalog(str(shallow), known_clouds(_db(tmp_path))).files
    assert files["alpha"].commit_date is None and "shallow clone" in files["alpha"].dated_by
    _write(repo, "beta", "h100x8,H100,8,208,1800,99.0,r1,,\n")
    edited = read_catalog(str(repo), known_clouds(_db(tmp_path))).files["beta"]
    assert edited.commit_date is None and "changed since its last commit" in edited.dated_by
    report = _refresh(_db(tmp_path), repo)
    beta = next(c for c in report.changes if c.offering == "beta/h100x8")
    assert beta.held_back and beta.held_back.startswith("the source file is undated")


def test_outside_git_each_file_takes_its_own_stated_date(tmp_path: Path) -> None:
    tree = tmp_path / "copy"
    _write(tree, "alpha", "h100x8,H100,8,208,1800,22.0,r1,,\n")
    _write(tree, "beta", "h100x8,H100,8,208,1800,25.0,r1,,\n")
    db = _db(tmp_path)
    undated = {c.offering: c for c in _refresh(db, tree).changes}
    assert all(c.held_back and "undated" in c.held_back for c in undated.values())
    with pytest.raises(UserError, match="holds 2 files, each from its own commit"):
        read_catalog(str(tree), known_clouds(db), stated=parse_stated(["2026-12-01"], None))
    source = read_catalog(str(tree), known_clouds(db), stated=parse_stated(["alpha=2026-03-02", "beta=2026-11-30"],
                                                                             ["beta=abc1234"]))
    assert (source.files["alpha"].commit_date, source.files["beta"].commit_date) == (date(2026, 3, 2),
                                                                                     date(2026, 11, 30))
    assert source.files["beta"].commit == "abc1234" and source.files["alpha"].dated_by == "stated"


@pytest.mark.parametrize(("as_of", "commit", "message"), [
    (["alpha=yesterday"], None, "not a date"), (["alpha=2999-01-01"], None, "in the future"),
    (["al pha=2026-01-01"], None, "not CLOUD=VALUE"), (None, ["alpha=zz"], "not a git commit hash"),
    (["alpha=2026-01-01", "alpha=2026-01-02"], None, "two dates for alpha")])
def test_bad_stated_dates_and_commits_are_one_line_errors(as_of, commit, message) -> None:
    with pytest.raises(UserError, match=message):
        parse_stated(as_of, commit)


def test_an_undated_shipped_price_is_dated_by_its_file_commit(checkout: tuple[Path, str], tmp_path: Path) -> None:
    repo, head = checkout
    # Read on 2026-12-03 from a file whose own last change (as of the recorded commit) is 2026-03-02.
    a100 = next(c for c in _refresh(_db(tmp_path, head), repo).changes if c.offering == "alpha/a100x8")
    assert a100.old_as_of.startswith("2026-03-02 (its file's last change as of commit")
    assert a100.applied and a100.new_price == 12.0
    # Without the commit it is undated, and a dated price replaces it rather than being held back as older.
    plain = next(c for c in _refresh(_db(tmp_path), repo).changes if c.offering == "alpha/a100x8")
    assert plain.old_as_of == "undated (read 2026-12-03)" and plain.applied
