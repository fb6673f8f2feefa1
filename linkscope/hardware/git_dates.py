"""The date of a file in a git checkout: the commit that last changed that file, never the repository's newest.

A catalog tree holds files of many commits (a frozen v7 file last changed months before the v8 file beside it), so
each file is dated by `git log -1 -- <file>`. Where git cannot know the file's own last change, the file is
undated rather than dated wrongly: a shallow clone's boundary commit stands for every older commit, and a file
edited since its last commit is not the committed content.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import date
from pathlib import Path

_TIMEOUT_S = 30


@dataclass(frozen=True)
class FileDate:
    """The commit that last changed a file and that commit's date, or why the file has none."""

    commit: str | None
    when: date | None
    why_undated: str | None = None


def _git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                              timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def checkout_top(directory: Path, marker: str = "catalogs") -> Path | None:
    """The top of the git checkout holding `directory`, when that checkout has `marker` at its top.

    A sample copied into another repository (tests, a user's dotfiles) must not be dated by that repository's
    commits, so only a checkout laid out like the source repository counts."""
    top = _git(directory, "rev-parse", "--show-toplevel")
    if not top or not (Path(top) / marker).is_dir():
        return None
    return Path(top)


def _parse(line: str | None) -> tuple[str, date] | None:
    parts = (line or "").split()
    if len(parts) != 2:
        return None
    try:
        return parts[0], date.fromisoformat(parts[1])
    except ValueError:
        return None


def _boundaries(top: Path) -> set[str]:
    """The commits a shallow clone was cut at (their parents are missing), empty for a full clone."""
    path = _git(top, "rev-parse", "--git-path", "shallow")
    if not path:
        return set()
    shallow = Path(path) if Path(path).is_absolute() else top / path
    try:
        return {line.strip() for line in shallow.read_text(encoding="utf-8").splitlines() if line.strip()}
    except OSError:
        return set()


def file_date(top: Path, file: Path) -> FileDate:
    """The last commit that changed `file` (inside the checkout at `top`) and its committer date."""
    relative = file.resolve().relative_to(top.resolve()).as_posix()
    found = _parse(_git(top, "log", "-1", "--format=%H %cs", "--", relative))
    if found is None:
        return FileDate(None, None, "not committed in the git checkout")
    commit, when = found
    if _git(top, "status", "--porcelain", "--", relative):
        return FileDate(commit, None, "changed since its last commit")
    if commit in _boundaries(top):
        return FileDate(commit, None, "a shallow clone hides its last change (fetch the history: "
                                      "git fetch --unshallow)")
    return FileDate(commit, when)


def file_date_at(top: Path, commit: str, relative: str) -> date | None:
    """When `relative` last changed as of `commit` in the checkout at `top`; None when the checkout lacks the
    commit (an older or shallow clone) or the file."""
    if not commit or not all(c in "0123456789abcdef" for c in commit.lower()):
        return None
    found = _parse(_git(top, "log", "-1", "--format=%H %cs", commit, "--", relative))
    if found is None or found[0] in _boundaries(top):
        return None
    return found[1]
