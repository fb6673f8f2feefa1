"""linkscope keeps at most five `type: ignore` / `noqa` pragmas, each saying on its line why it is there."""

from __future__ import annotations

import re
from pathlib import Path

import linkscope

PACKAGE = Path(linkscope.__file__).parent
PRAGMA = re.compile(r"#\s*(type:\s*ignore|noqa)\b.*")
REASON = re.compile(r"#\s*(type:\s*ignore\[[\w-]+\]|noqa: [A-Z0-9, ]+)\s*(#|-)\s*\S")


def _pragmas() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = PRAGMA.search(line)
            if match:
                found.append((f"{path.relative_to(PACKAGE)}:{number}", match.group(0)))
    return found


def test_at_most_five_pragmas_each_with_its_reason() -> None:
    pragmas = _pragmas()
    assert len(pragmas) <= 5, pragmas
    assert [where for where, text in pragmas if not REASON.match(text)] == []
