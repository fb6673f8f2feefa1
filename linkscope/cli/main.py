"""The `linkscope` command: a table of the commands, each loaded from its module when it runs. Parsing and printing
only; logic lives below."""

from __future__ import annotations

import gc
import os
import sys
import warnings
from typing import TextIO

import typer

from linkscope import __version__
from linkscope.cli.lazy import LazyCommand, LazyGroup


def _entry(name: str, module: str, help_line: str) -> LazyCommand:
    return LazyCommand(name, f"linkscope.cli.{module}", help_line)


# The order of `linkscope --help`. Each module defines `register(app)`, which adds the commands named here; the
# line is the first paragraph of the command's own help (tests/cli/test_main.py checks that the two agree).
COMMANDS = (
    _entry("export", "runs_cmd", "Export one run as JSON, CSV or a Prometheus textfile."),
    _entry("topo", "probe_cmd", "This machine as a System: GPUs, NVLink, the topo -m matrix, PCIe, NICs, NUMA, host."),
    _entry("nccl-log", "probe_cmd",
           "Which transport each pair of ranks used (P2P, SHM, NET/IB, sockets, NVLS...) and the fallbacks."),
    _entry("bench", "bench_cmd", "Measure collectives with nccl-tests' semantics; store them."),
    _entry("p2p", "bench_cmd", "Bandwidth and latency matrices between every pair of ranks."),
    _entry("calibrate", "calibrate_cmd",
           "Fit latency and bandwidth per op from a stored run, print the fit error, save a profile."),
    _entry("profiles", "calibrate_cmd", "List saved calibration profiles."),
    _entry("demo", "demo_cmd",
           "Probe, measure every collective on local ranks, calibrate, predict, advise, check; write report.html."),
    _entry("plan", "plan_cmd",
           "Place ranks on a topology; print the rank map, launcher inputs and what it saves over a naive placement."),
    _entry("check", "check_cmd",
           "Did I get what I paid for? PASS/WARN/FAIL/SKIP per item; exit 1 when something fails."),
    _entry("compare", "compare_cmd", "busbw at 8 B/1M/64M/1G, small-message latency and peak busbw, % against the "
           "first run, and what differs."),
    _entry("report", "report_cmd", "One self-contained HTML page (works offline): busbw vs size measured and "
           "predicted, p2p heatmaps, verdicts."),
    _entry("validate", "validate_cmd", "The model's error per kind, source and regime on the evidence set: "
           "in-sample, leave-one-source-out and\nleave-one-regime-out."),
    _entry("systems", "systems_cmd", "Named System presets: list them, or show one."),
    _entry("catalog", "catalog_cmd", "List cloud offerings with typed interconnect fields; check or refresh the data."),
    _entry("runs", "runs_cmd", "Stored runs: list them, or show one with its nccl-tests tables."),
    _entry("import", "runs_cmd", "Import results measured by other benchmarks (nccl-tests)."),
    _entry("predict", "predict_cmd", "Predict collectives, training steps, inference and scaling on any System."),
    _entry("advise", "advise_cmd", "Rank cloud offerings for a training or serving job, each with its best layout."),
)


class _Root(LazyGroup):
    entries = COMMANDS


app = typer.Typer(
    name="linkscope",
    help="Measure GPU interconnects the way nccl-tests does, check what a machine delivers, "
    "predict how a job runs on any offering, and choose what to rent.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_Root,
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


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """Warnings meant for the user (a skipped config file) as one stderr line; others as Python prints them.

    Marked by a `user_facing` attribute rather than by class, so the root imports no data module before a command
    runs."""
    if getattr(category, "user_facing", False):
        from linkscope.report.printable import printable_line

        print(f"warning: {printable_line(message)}", file=sys.stderr)
    else:
        _default_show_warning(message, category, filename, lineno, file, line)


_default_show_warning = warnings.showwarning
warnings.showwarning = _show_warning


def main() -> None:
    """Entry point of the `linkscope` console script and `python -m linkscope`."""
    # Loading a command creates tens of thousands of objects that live as long as the process (modules, classes,
    # validators); collecting garbage among them again and again while they are made cost a short command a
    # tenth of its time. The collector is off until the command's module is loaded (cli/lazy.py), then those
    # objects are set aside for good (gc.freeze) and collection resumes for what the command itself makes.
    gc.disable()
    # Pydantic looks for plugins in the metadata of every installed distribution the first time it builds a
    # validator; linkscope's validators check its own data files, which no plugin has reason to watch.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    app()
