"""`linkscope catalog`: which offerings have NVLink/NVSwitch inside the node and IB/RoCE/EFA between nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from linkscope.cli.common import console, err_console, print_json, user_errors
from linkscope.report.printable import printable
from linkscope.cli.options import (CatalogOpt, FabricOpt, GpuOpt, IbOpt, MaxPriceOpt, MinGpusOpt, MinScaleOutOpt,
                                   MultiNodeOpt, NvlinkOpt, NvswitchOpt, ProviderOpt, RdmaOpt, check_formats)
from linkscope.hardware.catalog import SORT_KEYS, OfferingFilter, filter_offerings, sort_offerings
from linkscope.hardware.check import check_db, stale_warning
from linkscope.hardware.currency import check_currency, in_currency, rates
from linkscope.hardware.errors import UserError, check_output_path, write_output
from linkscope.hardware.refresh import known_clouds, refresh
from linkscope.hardware.refresh_source import parse_stated, read_catalog
from linkscope.hardware.refresh_write import write_overrides
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import offering_dict
from linkscope.report.catalog import catalog_csv, catalog_table
from linkscope.report.catalog_html import render_catalog_page
from linkscope.report.refresh_diff import merge_lines, refresh_lines

catalog_app = typer.Typer(help="List cloud offerings with typed interconnect fields; check or refresh the data.",
                          invoke_without_command=True, no_args_is_help=False)


def warn_stale(offerings: list) -> None:
    """One stderr line when a price shown or used is older than 90 days."""
    line = stale_warning(offerings)
    if line:
        err_console.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)


def catalog(
    ctx: typer.Context,
    gpu: Optional[str] = GpuOpt, min_gpus: Optional[int] = MinGpusOpt, nvlink: bool = NvlinkOpt,
    nvswitch: bool = NvswitchOpt, ib: bool = IbOpt, rdma: bool = RdmaOpt, fabric: Optional[str] = FabricOpt,
    min_scale_out_gbit: Optional[float] = MinScaleOutOpt, provider: Optional[str] = ProviderOpt,
    max_price_per_gpu_hour: Optional[float] = MaxPriceOpt, multi_node: bool = MultiNodeOpt,
    sort: str = typer.Option("price-per-gpu", help=f"Sort by: {', '.join(SORT_KEYS)}."),
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV instead of a table."),
    extra: Optional[list[Path]] = CatalogOpt,
    check: bool = typer.Option(False, "--check", help="Check the data itself (prices, NICs, sources, dates); "
                               "print each finding and exit 1 if there is any."),
    currency: str = typer.Option("USD", "--currency", help="Show prices in USD, CNY or EUR (converted at the "
                                 "dated ECB reference rate in linkscope's data; filters use the same currency)."),
    html_file: Optional[Path] = typer.Option(None, "--html", help="Write the offerings (after the filters) "
                                             "as one self-contained page (sortable, filterable table; works offline)."),
) -> None:
    """List cloud offerings with typed interconnect fields, filtered and sorted. Unknown values say unknown."""
    if ctx.invoked_subcommand is not None:
        return
    check_formats(as_json, as_csv)
    check_output_path(html_file, "--html")
    db = load_db(extra or [])
    if check:
        findings = check_db(db)
        for finding in findings:
            typer.echo(printable(finding))
        typer.echo(f"{len(findings)} finding(s) in {len(db.offerings)} offerings, {len(db.gpus)} GPUs, "
                   f"{len(db.links)} links")
        raise typer.Exit(1 if findings else 0)
    wanted = OfferingFilter(gpu=gpu, min_gpus=min_gpus, nvlink=nvlink, nvswitch=nvswitch, ib=ib, rdma=rdma,
                            fabric=fabric, min_scale_out_gbit=min_scale_out_gbit, provider=provider,
                            max_price_per_gpu_hour=max_price_per_gpu_hour, multi_node=multi_node)
    target = check_currency(currency)
    shown = [in_currency(o, target) for o in db.offerings.values()]
    rows = sort_offerings(filter_offerings(shown, wanted, db), sort)
    converted = any(o.currency != target for o in db.offerings.values() if o.price_per_hour is not None)
    if converted:
        r = rates()
        err_console.print(f"prices in {target}, converted where published otherwise at the ECB reference rate of "
                          f"{r.as_of} ({r.source})", highlight=False, soft_wrap=True, markup=False)
    if html_file is not None:
        page = render_catalog_page(rows, note=f"{len(rows)} offerings from linkscope's catalog; prices in {target}, "
                                   "each with its date. Click a header to sort.")
        write_output(html_file, page, "--html")
        console.print(f"wrote {html_file} ({len(page) // 1024} KiB, {len(rows)} offerings)", highlight=False,
                      soft_wrap=True)
        warn_stale(rows)
        return
    if as_json:
        print_json([offering_dict(o) for o in rows])
    elif as_csv:
        typer.echo(catalog_csv(rows), nl=False)
    else:
        console.print(catalog_table(rows, width=console.width, currency=target))
        if not rows:
            console.print("No offering matches these filters.")
    warn_stale(rows)


def refresh_cmd(
    source: str = typer.Option(..., "--from", help="A directory laid out like skypilot-catalog "
                               "(catalogs/v<N>/<cloud>/vms.csv), one vms.csv, or an http(s) URL of one."),
    cloud: Optional[str] = typer.Option(None, "--cloud", help="Cloud of a single CSV (default: its directory name)."),
    commit: Optional[list[str]] = typer.Option(None, "--commit", help="[CLOUD=]HASH: the skypilot-catalog commit "
                                               "of a file (read from git in a checkout); repeat per cloud."),
    as_of: Optional[list[str]] = typer.Option(None, "--as-of", help="[CLOUD=]YYYY-MM-DD: the date of a file "
                                              "outside a git checkout (in one, each file is dated by its own last "
                                              "commit); repeat per cloud. An undated file's prices are held back."),
    apply: bool = typer.Option(False, "--apply", help="Merge the applied prices into the override file (entries "
                               "of other offerings are kept); without it only the diff is shown."),
) -> None:
    """Show what SkyPilot's catalog would change in the prices; with --apply, merge it into the config directory."""
    db = load_db()
    stated = parse_stated(as_of, commit)
    report = refresh(db, read_catalog(source, known_clouds(db), cloud, stated))
    for rejected in report.source.rejected:
        if rejected.blocking:
            err_console.print(f"rejected {rejected}", highlight=False, soft_wrap=True, markup=False)
    if report.blocking:
        raise UserError(f"{len(report.blocking)} row(s) of {source} rejected (listed above); nothing written",
                        field="from")
    for line in refresh_lines(report):
        typer.echo(printable(line))
    applied = [c for c in report.changes if c.applied]
    if not apply:
        typer.echo(f"nothing written; rerun with --apply to write {len(applied)} price(s)" if applied
                   else "nothing to write")
    elif applied:
        for line in merge_lines(write_overrides(report)):
            typer.echo(printable(line))
    else:
        typer.echo("nothing to write")


def register(app: typer.Typer) -> None:
    """Add `catalog` (and `catalog refresh`) to the command line."""
    catalog_app.callback(invoke_without_command=True)(user_errors(catalog))
    catalog_app.command("refresh")(user_errors(refresh_cmd))
    app.add_typer(catalog_app, name="catalog")
