"""Turn what a user types after `--system` into a System: a preset id, an offering id, or a YAML file.

`profile:NAME` (a calibrated profile) is resolved one layer up, in `model/calibration/systems.py`, so this module stays
free of imports from the model.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB, load_system_file
from linkscope.hardware.system import System

def _looks_like_file(spec: str) -> bool:
    return spec.endswith((".yaml", ".yml")) or "/" in spec and Path(spec).is_file()


def resolve_system(spec: str, db: HardwareDB) -> System:
    """`dgx-h100`, `aws/p5.48xlarge` or `my.yaml` -> System (UserError when nothing matches)."""
    spec = spec.strip()
    if not spec:
        raise UserError("empty value", field="system")
    if spec in db.systems:
        return db.systems[spec]
    if spec in db.offerings:
        return db.offerings[spec].system
    if _looks_like_file(spec):
        path = Path(spec)
        if not path.is_file():
            raise UserError(f"file '{spec}' not found", field="system")
        return load_system_file(path, db)
    raise UserError(f"unknown System '{spec}'{_hint(spec, db)}", field="system")


def _hint(spec: str, db: HardwareDB) -> str:
    names = [*db.systems, *db.offerings]
    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.5)
    if close:
        return f"; did you mean {', '.join(close)}?"
    return f" (use a preset such as {', '.join(list(db.systems)[:4])}, an offering id such as " \
           f"aws/p5.48xlarge, a YAML file or profile:NAME; see `linkscope systems` and `linkscope catalog`)"
