"""What every command shares: the consoles, JSON output, and turning UserError into one line + exit 2."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable, TypeVar

import typer
from rich.console import Console

from linkscope.hardware.errors import UserError

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USER_ERROR = 2


def fail(message: str, code: int = EXIT_USER_ERROR) -> None:
    """Print one line on stderr and exit."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def user_errors(func: F) -> F:
    """Report UserError as one line with exit code 2 instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            fail(str(exc))

    return wrapper  # type: ignore[return-value]


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
