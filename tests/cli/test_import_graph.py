"""The command line imports in one direction: `main` registers the command modules, none of them imports `main`
or runs in a circle through another."""

from __future__ import annotations

import graphlib
from pathlib import Path

import linkscope.cli
from tests.imports import imported_modules

CLI = Path(linkscope.cli.__file__).parent


def _cli_graph() -> dict[str, set[str]]:
    """Each module of `linkscope.cli` -> the modules of `linkscope.cli` it imports."""
    names = {path.stem for path in CLI.glob("*.py")}
    graph = {}
    for path in CLI.glob("*.py"):
        modules = imported_modules(path)
        graph[path.stem] = {name for name in names - {path.stem} if f"linkscope.cli.{name}" in modules}
    return graph


def test_no_import_circle_in_the_command_line() -> None:
    graph = _cli_graph()
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle in linkscope/cli: {' -> '.join(exc.args[1])}") from None
    assert set(order) == set(graph)


def test_no_command_module_imports_main() -> None:
    assert [name for name, imports in _cli_graph().items() if "main" in imports] == []
