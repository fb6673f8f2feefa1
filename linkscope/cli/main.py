"""The `linkscope` command: registers each command module. Parsing and printing only; logic lives below."""

from __future__ import annotations

import importlib

import typer

from linkscope import __version__

app = typer.Typer(
    name="linkscope",
    help="Measure GPU interconnects the way nccl-tests does, check what a machine delivers, "
    "predict how a job runs on any offering, and choose what to rent.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines `register(app)`. Imported lazily by name so that a command's heavy imports
# (torch for bench) are paid only by that command.
COMMAND_MODULES = [
    "linkscope.cli.systems_cmd",
    "linkscope.cli.catalog_cmd",
    "linkscope.cli.runs_cmd",
    "linkscope.cli.probe_cmd",
    "linkscope.cli.bench_cmd",
    "linkscope.cli.predict_cmd",
    "linkscope.cli.calibrate_cmd",
    "linkscope.cli.demo_cmd",
    "linkscope.cli.advise_cmd",
    "linkscope.cli.plan_cmd",
    "linkscope.cli.check_cmd",
    "linkscope.cli.compare_cmd",
    "linkscope.cli.report_cmd",
    "linkscope.cli.validate_cmd",
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"linkscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """linkscope: GPU interconnects, measured, checked, predicted."""


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    """Entry point of the `linkscope` console script and `python -m linkscope`."""
    app()
