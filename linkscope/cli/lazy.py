"""A command group that imports a command's module only when that command runs.

`linkscope --help` lists the commands from a table of names and one-line helps, so answering it (or running one
command) never imports the modules of the other commands and what they pull in below.
"""

from __future__ import annotations

import functools
import gc
import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # annotations only: this typer vendors click as typer._click; older typers depend on click
    from typer import _click as click


@dataclass(frozen=True)
class LazyCommand:
    """One command of the root: its name, the module whose `register(app)` adds it, and the line `--help` shows."""

    name: str
    module: str
    help: str


@functools.cache
def module_commands(module: str) -> dict[str, click.Command]:
    """The click commands `module.register(app)` adds, by name (built once per process: registering twice would
    add a module's sub-commands twice)."""
    app = typer.Typer()
    importlib.import_module(module).register(app)
    if not gc.isenabled():  # main() held collection back while the command loaded (see there)
        gc.freeze()
        gc.enable()
    return dict(typer.main.get_group(app).commands)


class _Commands(MutableMapping[str, "click.Command"]):
    """Every name of the table; a command is built (its module imported) when it is looked up."""

    def __init__(self, entries: tuple[LazyCommand, ...]) -> None:
        self._modules = {entry.name: entry.module for entry in entries}
        self._added: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name in self._added:
            return self._added[name]
        return module_commands(self._modules[name])[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._added[name] = command

    def __delitem__(self, name: str) -> None:
        self._added.pop(name, None)
        self._modules.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._modules
        yield from (name for name in self._added if name not in self._modules)

    def __len__(self) -> int:
        return len(self._modules.keys() | self._added.keys())


class LazyGroup(TyperGroup):
    """The root group: subclasses set `entries`, in the order `--help` lists them."""

    entries: ClassVar[tuple[LazyCommand, ...]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        # A mapping, not a method override, so that typer's "did you mean" sees every name too.
        self.commands = _Commands(self.entries)
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every name, in the table's order, without building one."""
        return list(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command itself when it runs; while the help is listing commands, a stand-in with the table's line."""
        if self._listing:
            entry = next((e for e in self.entries if e.name == cmd_name), None)
            if entry is not None:
                return _stand_in(entry)
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The help, listing the commands without importing them."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _stand_in(entry: LazyCommand) -> click.Command:
    return TyperCommand(entry.name, short_help=entry.help)
