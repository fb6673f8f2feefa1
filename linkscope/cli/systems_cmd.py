"""`linkscope systems`: the named System presets (and any from user files)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from linkscope.cli.options import CatalogOpt
from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.loader import load_db
from linkscope.hardware.resolve import resolve_system
from linkscope.hardware.serialize import system_dict
from linkscope.report.catalog import system_detail, systems_table

systems_app = typer.Typer(help="Named System presets: list them, or show one.", no_args_is_help=False)


@systems_app.callback(invoke_without_command=True)
@user_errors
def systems(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="JSON instead of a table."),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """List the System presets."""
    if ctx.invoked_subcommand:
        return
    db = load_db(extra or [])
    items = list(db.systems.values())
    if as_json:
        print_json([system_dict(s) for s in items])
    else:
        console.print(systems_table(items))


@systems_app.command("show")
@user_errors
def show(
    system: str = typer.Argument(..., help="Preset id, offering id (provider/instance) or System YAML file."),
    as_json: bool = typer.Option(False, "--json", help="JSON instead of a table."),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Show one System: a preset, a catalog offering or a System file."""
    resolved = resolve_system(system, load_db(extra or []))
    if as_json:
        print_json(system_dict(resolved))
    else:
        console.print(system_detail(resolved))


def register(app: typer.Typer) -> None:
    """Add `systems` and `systems show` to the command line."""
    app.add_typer(systems_app, name="systems")
