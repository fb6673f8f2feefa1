"""Turn what a user types after `--system` into a System: a preset id, an offering id, or a YAML file.

Higher layers add their own schemes (`profile:NAME` for calibrated profiles) through `schemes`, so this
module stays free of imports from them.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from collections.abc import Callable, Mapping

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB, load_system_file
from linkscope.hardware.system import System

SchemeResolver = Callable[[str], System]


def _looks_like_file(spec: str) -> bool:
    return spec.endswith((".yaml", ".yml")) or "/" in spec and Path(spec).is_file()


def resolve_system(spec: str, db: HardwareDB, schemes: Mapping[str, SchemeResolver] | None = None) -> System:
    """`dgx-h100`, `aws/p5.48xlarge`, `my.yaml` or `scheme:NAME` -> System (UserError when nothing matches)."""
    spec = spec.strip()
    if not spec:
        raise UserError("--system: empty value")
    scheme, sep, rest = spec.partition(":")
    if sep and schemes and scheme in schemes:
        return schemes[scheme](rest)
    if spec in db.systems:
        return db.systems[spec]
    if spec in db.offerings:
        return db.offerings[spec].system
    if _looks_like_file(spec):
        path = Path(spec)
        if not path.is_file():
            raise UserError(f"--system: file '{spec}' not found")
        return load_system_file(path, db)
    raise UserError(f"--system: unknown System '{spec}'{_hint(spec, db, schemes)}")


def _hint(spec: str, db: HardwareDB, schemes: Mapping[str, SchemeResolver] | None) -> str:
    names = [*db.systems, *db.offerings]
    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.5)
    if close:
        return f"; did you mean {', '.join(close)}?"
    extra = f", {', '.join(f'{s}:NAME' for s in schemes)}" if schemes else ""
    return f" (use a preset such as {', '.join(list(db.systems)[:4])}, an offering id such as " \
           f"aws/p5.48xlarge, a YAML file{extra}; see `linkscope systems` and `linkscope catalog`)"
