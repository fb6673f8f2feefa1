"""`linkscope validate`: the model's error on the evidence set, in-sample, leave-one-source-out and
leave-one-regime-out."""

from __future__ import annotations

import typer

from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.errors import UserError
from linkscope.model.fidelity.evidence import EMPTY_KINDS, KINDS
from linkscope.model.fidelity.validate import packaged_validation
from linkscope.report.validate import (entries_table, kinds_table, regimes_table, sources_table,
                                       worst_regimes_lines)


CHOICES = (*KINDS, *EMPTY_KINDS)
"""What --kind takes: the kinds with entries and those listed without any yet."""

@user_errors
def validate_command(
    as_json: bool = typer.Option(False, "--json", help="JSON: kinds, sources, regimes, fitted constants."),
    entries: bool = typer.Option(False, "--entries", help="Also every entry's measured and predicted value."),
    kind: str | None = typer.Option(None, "--kind", help=f"Only entries of this kind ({', '.join(CHOICES)})."),
    source: str | None = typer.Option(None, "--source", help="Only the entries of this source id."),
) -> None:
    """The model's error per kind, source and regime on the evidence set: in-sample, leave-one-source-out and
    leave-one-regime-out.

    Also the coverage and half-width of the p10..p90 ranges, and the worst regimes of each kind."""
    if kind is not None and kind not in CHOICES:
        raise UserError(f"unknown kind '{kind}' (choose from {', '.join(CHOICES)})", field="kind")
    result = packaged_validation()
    if kind is not None or source is not None:
        # Ranges and coverage stay those computed from every source: a filter chooses what is shown.
        result = result.selected(kind, source)
    if not result.entries:
        what = " and ".join(f"{flag} {value}" for flag, value in (("--kind", kind), ("--source", source)) if value)
        message = f"no evidence entry matches {what}"
        if as_json:
            print_json({**result.as_dict(with_entries=entries), "note": message})
        else:
            console.print(message, highlight=False, markup=False)
        return
    if as_json:
        print_json(result.as_dict(with_entries=entries))
        return
    console.print(kinds_table(result))
    console.print(sources_table(result))
    console.print(regimes_table(result))
    if entries:
        console.print(entries_table(result))
    for line in worst_regimes_lines(result):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `validate` to the command line."""
    app.command("validate")(validate_command)
