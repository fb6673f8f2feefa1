"""A command group that imports a command's module only when that command runs.

`linkscope --help` lists the commands from a table of names and one-line helps, so answering it (or running one
command) never imports the modules of the other commands and what they pull in below.
"""

from __future__ import annotations

import functools
import gc
import importlib
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # annotations only: this typer vendors click as typer._click; older typers depend on click
    from typer import _click as click
    from typer.models import CommandInfo


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
    # Typer would build every sub-command of a group (signature, annotations, a validator per option): for
    # `predict train`, its three siblings cost more than the command itself. The groups are built empty, then
    # given their sub-commands as a mapping that builds one when it is looked up.
    groups = {info.name: info.typer_instance for info in app.registered_groups if info.typer_instance is not None}
    registered = {name: owner.registered_commands for name, owner in groups.items()}
    for owner in groups.values():
        owner.registered_commands = []
    try:
        commands = dict(typer.main.get_group(app).commands)
    finally:
        for name, owner in groups.items():
            owner.registered_commands = registered[name]
    for name, owner in groups.items():
        group = commands.get(name or "")
        if isinstance(group, TyperGroup):
            group.commands = _Leaves(owner)
    return commands


class _LazyCommands(MutableMapping[str, "click.Command"]):
    """Command names known up front, each command built on its first lookup; commands added later are kept as
    given (click's and typer's own mapping protocol)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = dict.fromkeys(names)
        self._added: dict[str, click.Command] = {}

    def _build(self, name: str) -> click.Command:
        raise NotImplementedError

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._added:
            if name not in self._names:
                raise KeyError(name)
            return self._build(name)
        return self._added[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._added[name] = command

    def __delitem__(self, name: str) -> None:
        self._added.pop(name, None)
        self._names.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._names
        yield from (name for name in self._added if name not in self._names)

    def __len__(self) -> int:
        return len(self._names.keys() | self._added.keys())


class _Commands(_LazyCommands):
    """Every name of the root's table; a command is built (its module imported) when it is looked up."""

    def __init__(self, entries: tuple[LazyCommand, ...]) -> None:
        super().__init__(entry.name for entry in entries)
        self._modules = {entry.name: entry.module for entry in entries}

    def _build(self, name: str) -> click.Command:
        return module_commands(self._modules[name])[name]


class _Leaves(_LazyCommands):
    """A typer group's sub-commands, each built by typer the first time it is looked up."""

    def __init__(self, owner: typer.Typer) -> None:
        self._infos = {_leaf_name(info): info for info in owner.registered_commands}
        super().__init__(self._infos)
        self._owner = owner
        self._built: dict[str, click.Command] = {}

    def _build(self, name: str) -> click.Command:
        if name not in self._built:
            single = typer.Typer(add_completion=False, rich_markup_mode=self._owner.rich_markup_mode,
                                 pretty_exceptions_short=self._owner.pretty_exceptions_short)
            single.registered_commands = [self._infos[name]]
            # One command and no callback: typer.main.get_command returns that command itself.
            self._built[name] = typer.main.get_command(single)
        return self._built[name]


def _leaf_name(info: CommandInfo) -> str:
    assert info.callback is not None
    return info.name or typer.main.get_command_name(info.callback.__name__)


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
