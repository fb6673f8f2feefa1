"""`linkscope validate`: the model's error on the evidence set, in-sample, leave-one-source-out and
leave-one-regime-out."""

from __future__ import annotations

import typer

from linkscope.cli.common import console, print_json, user_errors
from linkscope.model.fidelity.validate import packaged_validation
from linkscope.report.validate import entries_table, kinds_table, regimes_table, sources_table


@user_errors
def validate_command(
    as_json: bool = typer.Option(False, "--json", help="JSON: kinds, sources, regimes, fitted constants."),
    entries: bool = typer.Option(False, "--entries", help="Also every entry's measured and predicted value."),
) -> None:
    """The model's error per kind, source and regime on the evidence set: in-sample, leave-one-source-out and
    leave-one-regime-out."""
    result = packaged_validation()
    if as_json:
        print_json(result.as_dict(with_entries=entries))
        return
    console.print(kinds_table(result))
    console.print(sources_table(result))
    console.print(regimes_table(result))
    if entries:
        console.print(entries_table(result))


def register(app: typer.Typer) -> None:
    """Add `validate` to the command line."""
    app.command("validate")(validate_command)
