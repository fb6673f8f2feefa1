"""`model/` is built in floors: a room imports only its own floor and the ones below, never one above."""

from __future__ import annotations

from pathlib import Path

import linkscope.model
from tests.imports import imported_modules

MODEL = Path(linkscope.model.__file__).parent
FLOORS = ("ranges", "comm", "step", "calibration", "fidelity")
"""From the ground up: ranges, then the predictors, then what fits them to measurements."""


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["linkscope", "model"] else None


def test_every_room_of_model_has_a_floor() -> None:
    rooms = {p.name for p in MODEL.iterdir() if (p / "__init__.py").is_file()}
    assert rooms == set(FLOORS)


def test_no_room_of_model_imports_upward() -> None:
    upward = []
    for room in FLOORS:
        for path in sorted((MODEL / room).rglob("*.py")):
            for module in imported_modules(path):
                target = _room(module)
                if target in FLOORS and FLOORS.index(target) > FLOORS.index(room):
                    upward.append(f"{path.relative_to(MODEL)} imports {module}")
    assert upward == []
