"""`linkscope runs`, `runs show`, `export` and `import nccl-tests`: the stored runs, listed, shown, exported and
imported."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from linkscope.cli.common import console, err_console, print_json, user_errors
from linkscope.report.printable import printable
from linkscope.cli.options import DbOpt, check_formats
from linkscope.hardware.limits import MAX_LIST_ROWS
from linkscope.hardware.errors import UserError, check_output_path, write_output
from linkscope.report.runs import metadata_table, model_choices, pairs_table, runs_table
from linkscope.results.export import (format_nccl_tests_table, kv_run_to_csv, moe_run_to_csv, nccl_choice_lines,
                                      run_to_csv, run_to_json, train_run_to_csv)
from linkscope.results.nccltests import import_nccl_tests_file
from linkscope.results.records import RUN_KINDS, RunInfo
from linkscope.results.store import DB_ENV, DbLocation, ResultStore, require_existing

DbOption = DbOpt

runs_app = typer.Typer(help="Stored runs: list them, or show one with its nccl-tests tables.")
import_app = typer.Typer(help="Import results measured by other benchmarks (nccl-tests).", no_args_is_help=True)


@runs_app.callback(invoke_without_command=True)
@user_errors
def runs(
    ctx: typer.Context,
    db: Optional[str] = DbOption,
    kind: Optional[str] = typer.Option(None, help="Only runs of this kind: bench, p2p, train, moe, check or import."),
    label: Optional[str] = typer.Option(None, help="Only runs with this label."),
    limit: Optional[int] = typer.Option(None, min=1, max=MAX_LIST_ROWS,
                                         help="At most this many runs, newest first."),
    as_json: bool = typer.Option(False, "--json", help="JSON instead of a table."),
) -> None:
    """List stored runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    if kind is not None and kind not in RUN_KINDS:
        raise UserError(f"--kind: '{kind}' is not one of {', '.join(RUN_KINDS)}")
    with ResultStore(_existing(db)) as store:
        summaries = store.list_runs(limit=limit, kind=kind, label=label)
        stored_any = bool(summaries) or bool(store.list_runs(limit=1))
    if as_json:
        print_json([vars(s) for s in summaries])
    elif not summaries and stored_any:
        given = " and ".join(f"{name} '{value}'" for name, value in (("kind", kind), ("label", label)) if value)
        console.print(f"No stored run has {given} (`linkscope runs` lists them all).", highlight=False)
    elif not summaries:
        console.print("No runs stored yet (`linkscope bench` or `linkscope import nccl-tests FILE`).")
    else:
        console.print(runs_table(summaries, width=console.width))


def _existing(db: Optional[str]) -> Optional[DbLocation]:
    """Reading commands never create a database: --db or $LINKSCOPE_DB (one rule for both) must name an existing
    one; only the default file in the user data directory may be created."""
    return None if db is None and not os.environ.get(DB_ENV) else require_existing(db)


@runs_app.command("show")
@user_errors
def show(
    run_id: str = typer.Argument(..., help="Run id or a unique prefix of it."),
    db: Optional[str] = DbOption,
    as_json: bool = typer.Option(False, "--json", help="The run as nccl-tests-style JSON."),
) -> None:
    """Show one run: its metadata and, per collective, the table nccl-tests would print."""
    with ResultStore(_existing(db)) as store:
        info = store.get_run(run_id)
        rows, pairs = store.rows(info.run_id), store.pair_rows(info.run_id)
    if as_json:
        print_json(run_to_json(info, rows, pairs))
        return
    console.print(metadata_table(info))
    if rows:
        typer.echo(printable(_tables(info, rows)), nl=False)
        for line in nccl_choice_lines(rows, model_choices(info, rows)):
            typer.echo(printable(line))
    if pairs:
        console.print(pairs_table(pairs))
    if info.kind == "train":
        _print_train(info)
    elif info.kind == "moe":
        _print_moe(info)
    elif info.kind == "kv":
        _print_kv(info)
    elif not rows and not pairs:
        console.print("This run has no rows.")


def _tables(info: RunInfo, rows: list) -> str:
    """Imported output as its file had it; linkscope's own runs as nccl-tests would print them."""
    from linkscope.results.nccltests.table import format_imported_tables

    sections = info.extra.get("sections") if info.kind == "import" else None
    if isinstance(sections, list) and sections:
        text = format_imported_tables(rows, sections)
        if text is not None:
            return text
    return format_nccl_tests_table(rows)


def _print_train(info: RunInfo) -> None:
    from linkscope.report.train import point_lines, scaling_lines, sweep_lines

    summary = info.extra.get("train_summary") or {}
    lines = [line for doc in summary.get("points") or [] for line in point_lines(doc)]
    if summary.get("sweep"):
        lines += sweep_lines(summary["sweep"])
    if summary.get("scaling"):
        lines += scaling_lines(summary["scaling"])
    if not lines:
        steps = sum(len(p.get("steps", [])) for p in (info.extra.get("train") or {}).get("points", []))
        lines = [f"# {steps} training step(s) stored, no summary (the run ended early)"]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_moe(info: RunInfo) -> None:
    from linkscope.report.bench_moe import moe_lines

    doc = info.extra.get("moe_summary")
    lines = moe_lines(doc) if doc else ["# no dispatch/combine timed (the run ended early)"]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_kv(info: RunInfo) -> None:
    from linkscope.report.bench_kv import kv_lines

    doc = info.extra.get("kv_summary")
    lines = kv_lines(doc) if doc else ["# no KV pages timed (the run ended early)"]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@user_errors
def export(
    run_id: str = typer.Argument(..., help="Run id or a unique prefix of it."),
    db: Optional[str] = DbOption,
    as_json: bool = typer.Option(False, "--json", help="nccl-tests `-J` JSON with linkscope's keys added."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV, one line per op, size and placement."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
    prometheus: Optional[Path] = typer.Option(None, "--prometheus", help="Write a node_exporter textfile "
                                              "(NCCL Inspector's metric names) to this file."),
) -> None:
    """Export one run as JSON, CSV or a Prometheus textfile."""
    if prometheus is not None:
        _export_prometheus(run_id, db, prometheus, as_json or as_csv or output is not None)
        return
    check_formats(as_json, as_csv, required=True)
    check_output_path(output, "-o")
    with ResultStore(_existing(db)) as store:
        info = store.get_run(run_id)
        rows = store.rows(info.run_id)
        pairs = store.pair_rows(info.run_id) if as_json else []
    if as_json and output is None:
        print_json(run_to_json(info, rows, pairs))
        return
    csv_text = train_run_to_csv(info) if info.kind == "train" else moe_run_to_csv(info) if info.kind == "moe" \
        else kv_run_to_csv(info) if info.kind == "kv" \
        else run_to_csv(rows)
    text = json.dumps(run_to_json(info, rows, pairs), indent=2) + "\n" if as_json else csv_text
    if output is None:
        typer.echo(text, nl=False)
        return
    write_output(output, text, "-o")
    err_console.print(f"wrote {output}")


def _export_prometheus(run_id: str, db: Optional[str], path: Path, other_format: bool) -> None:
    from linkscope.results.prometheus import stored_run_samples, write_textfile

    if other_format:
        raise UserError("--prometheus writes its own file: give it without --json, --csv or -o")
    check_output_path(path, "--prometheus")
    with ResultStore(_existing(db)) as store:
        info = store.get_run(run_id)
        rows = store.rows(info.run_id)
    samples = stored_run_samples(info, rows)
    write_textfile(path, samples)
    err_console.print(f"wrote {path} ({len(samples)} samples)", highlight=False)


@import_app.command("nccl-tests")
@user_errors
def import_nccl_tests_cmd(
    file: Path = typer.Argument(..., help="nccl-tests output: text (any version) or the -J JSON file."),
    label: Optional[str] = typer.Option(None, "--label", help="Label for the run (default: the file name)."),
    db: Optional[str] = DbOption,
) -> None:
    """Store an nccl-tests output file as a run, so it can be compared with linkscope's own runs."""
    with ResultStore(db) as store:
        result = import_nccl_tests_file(file, store, label if label is not None else file.stem)
    if result.already_imported:
        console.print(f"{file}: already imported as run {result.run_id}; nothing stored", highlight=False)
        return
    parsed = result.parsed
    for problem in parsed.problems:
        err_console.print(f"[yellow]warning:[/] {escape(f'{file}: {problem}')}", highlight=False)
    ops = ", ".join(dict.fromkeys(s.op for s in parsed.sections if s.rows))
    console.print(f"imported run {result.run_id}: {len(parsed.rows)} rows from {len(parsed.sections)} "
                  f"section(s) ({ops}), {parsed.world_size} ranks on {len(parsed.hosts)} host(s), "
                  f"{len(parsed.problems)} warning(s)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `runs`, `export` and `import` to the command line."""
    app.add_typer(runs_app, name="runs")
    app.command("export")(export)
    app.add_typer(import_app, name="import")
