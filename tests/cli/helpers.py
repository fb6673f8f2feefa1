"""Run the real `linkscope` typer app in-process."""

from __future__ import annotations

from typer.testing import CliRunner, Result

from linkscope.cli.main import app


def run_cli(*args: str) -> Result:
    """Invoke `linkscope ARGS...` and return the result (stdout, stderr, exit_code)."""
    return CliRunner().invoke(app, list(args), catch_exceptions=False)
