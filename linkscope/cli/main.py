"""The `linkscope` command: registers each command module. Parsing and printing only; logic lives below."""

from __future__ import annotations

import sys
import warnings
from typing import TextIO

import typer

from linkscope import __version__
from linkscope.cli import (advise_cmd, bench_cmd, calibrate_cmd, catalog_cmd, check_cmd, compare_cmd, demo_cmd,
                           plan_cmd, predict_cmd, probe_cmd, report_cmd, runs_cmd, systems_cmd, validate_cmd)
from linkscope.hardware.loader import ConfigFileWarning

app = typer.Typer(
    name="linkscope",
    help="Measure GPU interconnects the way nccl-tests does, check what a machine delivers, "
    "predict how a job runs on any offering, and choose what to rent.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



def _version(value: bool) -> None:
    if value:
        typer.echo(f"linkscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """linkscope: GPU interconnects, measured, checked, predicted."""


# Each module defines `register(app)`; the order is the order of `linkscope --help`. No command module imports
# torch at import time (bench imports it when it runs), so every command starts fast.
COMMAND_MODULES = (systems_cmd, catalog_cmd, runs_cmd, probe_cmd, bench_cmd, predict_cmd, calibrate_cmd, demo_cmd,
                   advise_cmd, plan_cmd, check_cmd, compare_cmd, report_cmd, validate_cmd)
for _module in COMMAND_MODULES:
    _module.register(app)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """Warnings meant for the user (a skipped config file) as one stderr line; others as Python prints them."""
    if issubclass(category, ConfigFileWarning):
        print(f"warning: {message}", file=sys.stderr)
    else:
        _default_show_warning(message, category, filename, lineno, file, line)


_default_show_warning = warnings.showwarning
warnings.showwarning = _show_warning


def main() -> None:
    """Entry point of the `linkscope` console script and `python -m linkscope`."""
    app()
