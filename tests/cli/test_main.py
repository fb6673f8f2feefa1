"""The root command lists every command from its table, and loads a command's module only when that command runs."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap

from linkscope.cli.lazy import module_commands
from linkscope.cli.main import COMMANDS
from tests.cli.helpers import run_cli

MODULES = tuple(dict.fromkeys(entry.module for entry in COMMANDS))


def test_the_table_names_every_command_the_modules_register_once() -> None:
    registered = [name for module in MODULES for name in module_commands(module)]
    assert sorted(registered) == sorted(entry.name for entry in COMMANDS)
    for entry in COMMANDS:
        assert entry.name in module_commands(entry.module)


def test_help_lists_every_command_with_the_first_paragraph_of_its_own_help() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    listed = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("│ ") and line.split()[1:]}
    assert {entry.name for entry in COMMANDS} <= listed
    for entry in COMMANDS:
        command = module_commands(entry.module)[entry.name]
        own = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0].strip()
        assert entry.help == own, entry.name


def test_a_mistyped_command_is_answered_with_the_closest_name() -> None:
    result = run_cli("predik", "train")
    assert result.exit_code == 2
    assert "Did you mean 'predict'?" in result.output


PREDICT_TRAIN = ("predict", "train", "-s", "dgx-h100", "-m", "llama2-7b", "--json")


def _fresh_run(run: str, after: str, *args: str) -> tuple[list[str], object]:
    """`linkscope ARGS...` run by `run` (a call on linkscope.cli.main's names) in a fresh process, then `after`;
    the lines the command printed, and the last line (what `after` printed) decoded from JSON."""
    code = (f"import gc, json, sys\nfrom linkscope.cli.main import app, main\nsys.argv[0] = 'linkscope'\n"
            f"try:\n{textwrap.indent(run, '    ')}\nexcept SystemExit:\n    pass\n{after}\n")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[:-1], json.loads(out.splitlines()[-1])


def _loaded_command_modules(*args: str) -> object:
    """The command modules a fresh `linkscope ARGS...` imported."""
    return _fresh_run("app(sys.argv[1:])", "print(json.dumps(sorted(m for m in sys.modules "
                                           "if m.startswith('linkscope.cli.') and m.endswith('_cmd'))))", *args)[1]


def test_help_imports_no_command_module_and_a_command_only_its_own() -> None:
    assert _loaded_command_modules("--help") == []
    assert _loaded_command_modules(*PREDICT_TRAIN) == ["linkscope.cli.predict_cmd"]


def test_predict_train_on_a_preset_loads_only_what_it_prints() -> None:
    # What a JSON answer about a preset never needs: rich's console and tables, other commands' models, the MoE
    # model (a dense model's step never prices dispatch and combine), the offering catalog (its schema is built
    # only when an offering file is read). Collection is back on once the command has loaded, for long-running
    # commands.
    # main() rather than app(): it is what holds the collector back while the command loads.
    printed, last = _fresh_run(
        "main()", "from linkscope.hardware.schema import OfferingEntry\n"
        "print(json.dumps([sorted(m for m in ('rich.console', 'rich.table', 'linkscope.model.step.infer', "
        "'linkscope.model.calibration.profiles', 'linkscope.model.comm.moe') if m in sys.modules), "
        "OfferingEntry.__pydantic_complete__, gc.isenabled()]))", *PREDICT_TRAIN)
    assert last == [[], False, True]
    assert json.loads("\n".join(printed))["model"] == "llama2-7b"


def test_the_console_made_on_first_use_reads_columns_at_each_print(monkeypatch) -> None:
    # Made while one call set COLUMNS=40, it must not keep that width for a later call that sets 200.
    import io

    from linkscope.cli.common import _ConsoleOnFirstUse

    lazy = _ConsoleOnFirstUse(stderr=False)
    monkeypatch.setenv("COLUMNS", "40")
    assert lazy.width == 40
    monkeypatch.setenv("COLUMNS", "200")
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    lazy.print("x" * 150, highlight=False)
    assert out.getvalue() == "x" * 150 + "\n"


def test_a_group_builds_only_the_sub_command_that_runs() -> None:
    # Typer builds a command's parameters (signature, annotations, a validator per option) when it makes the
    # command: `predict train` must not pay for collective, infer, scaling and moe.
    count = ("import typer.main\nbuilt = []\nmake = typer.main.get_command_from_info\n"
             "def counted(command_info, **kw):\n    built.append(command_info.callback.__name__)\n"
             "    return make(command_info, **kw)\n"
             "typer.main.get_command_from_info = counted\napp(sys.argv[1:])")
    assert _fresh_run(count, "print(json.dumps(built))", *PREDICT_TRAIN)[1] == ["train"]


def test_a_group_lists_and_suggests_every_sub_command() -> None:
    listed = run_cli("predict", "--help")
    assert listed.exit_code == 0
    for name in ("collective", "train", "infer", "scaling", "moe"):
        assert f"│ {name} " in listed.stdout
    mistyped = run_cli("predict", "trian")
    assert mistyped.exit_code == 2
    assert "Did you mean 'train'?" in mistyped.output
