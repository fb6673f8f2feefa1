"""What every command shares: the consoles, JSON output, and turning UserError into one line + exit 2."""

from __future__ import annotations

import errno
import functools
import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar, cast
from collections.abc import Callable

import typer

from linkscope.hardware.errors import FaultError, UserError

if TYPE_CHECKING:
    from rich.console import Console


class _ConsoleOnFirstUse:
    """A rich Console made when first used: importing rich's console costs a command that prints JSON or one
    line a noticeable share of its start-up, for nothing."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            made = _printable_console()(stderr=self._stderr)
            # rich pins the width and height to $COLUMNS/$LINES as they are at creation; made at import, as it
            # was, it read them at each print instead, which a caller that sets them per call (a test runner)
            # relies on.
            made._width = made._height = None
            self._console = made
        return getattr(self._console, name)


def _printable_console() -> type[Console]:
    """rich's Console, with every string it prints (tables' cells included) passed through `printable` first: a
    label or hostname holding terminal escape codes is shown escaped, whichever table or line prints it."""
    from rich.console import Console
    from rich.text import Text

    from linkscope.report.printable import printable

    class PrintableConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Text:
            return super().render_str(printable(text), **kwargs)

    return PrintableConsole


console = cast("Console", _ConsoleOnFirstUse(stderr=False))
err_console = cast("Console", _ConsoleOnFirstUse(stderr=True))

P = ParamSpec("P")
R = TypeVar("R")

EXIT_USER_ERROR = 2
EXIT_FAULT = 3

_DURING_RUN_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT})
"""OS errors that are the machine's fault, not the input's: exit 3 (a fault) rather than 2."""

FLAG_NAMES: dict[str, str] = {"warmup": "-w/--warmup", "iters": "-n/--iters", "root": "-r/--root",
                              "run_id": "RUN_ID", "hosts": "--hosts"}
"""Where a lower layer's field name is not the flag's long name with dashes."""


def fail(message: str, code: int = EXIT_USER_ERROR) -> NoReturn:
    """Print one line on stderr and exit."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Report UserError as one line with exit code 2, and FaultError (a database server that went away, a node
    that died) as one line with exit code 3, instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            fail(exc.for_flags(FLAG_NAMES))
        except FaultError as exc:
            fail(str(exc), EXIT_FAULT)
        except OSError as exc:
            # The last net for what no layer named: a path too long (ENAMETOOLONG), a full or read-only disk, a
            # permission. One line naming the file; what a run measured was committed as it came.
            name = str(exc.filename or "")
            where = f"{name[:100]}...: " if len(name) > 100 else f"{name}: " if name else ""
            fail(f"{where}{exc.strerror or exc}", EXIT_FAULT if exc.errno in _DURING_RUN_ERRNOS else EXIT_USER_ERROR)
        except OverflowError:
            fail("a number given is too large for linkscope to use (check the options and files given)")

    return wrapper


T = TypeVar("T")


def deprecated_spelling(old_value: T | None, old: str, new: str, new_value: T) -> T:
    """The value of an option given by its old name, with one line on stderr; else the new option's value.

    Old spellings keep working for one release (0.2 drops them), so scripts get a warning, not a break.
    """
    if old_value is None:
        return new_value
    err_console.print(f"warning: {old} is deprecated and will be removed in linkscope 0.2; use {new}",
                      highlight=False, soft_wrap=True, markup=False)
    return old_value


def check_range(value: float | None, flag: str, low: float, high: float) -> None:
    """None means "not given"; anything else (0 included) must lie in [low, high]."""
    if value is None:
        return
    if not (low <= value <= high):  # also rejects nan
        raise UserError(f"{flag} must be between {_plain_number(low)} and {_plain_number(high)} "
                        f"(got {_plain_number(value)})")


def _plain_number(value: float) -> str:
    """Whole numbers as written (100,000,000), fractions and non-finite values as `g` does."""
    if isinstance(value, int) or (value == value and abs(value) < 1e18 and float(value).is_integer()):
        return f"{int(value):,}"
    return f"{value:g}"


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no colour, no wrapping) so it pipes into jq."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
