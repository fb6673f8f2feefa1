"""`linkscope catalog`: which offerings have NVLink/NVSwitch inside the node and IB/RoCE/EFA between nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.catalog import SORT_KEYS, OfferingFilter, filter_offerings, sort_offerings
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import offering_dict
from linkscope.report.catalog import catalog_csv, catalog_table

CatalogOption = typer.Option(None, "--catalog", help="Extra data file(s) with offerings, presets or GPUs.")


def catalog(
    gpu: Optional[str] = typer.Option(None, help="GPU id, alias or family (H100 matches every H100 variant)."),
    min_gpus: Optional[int] = typer.Option(None, help="At least this many GPUs per node."),
    nvlink: bool = typer.Option(False, "--nvlink", help="Any NVLink inside the node (switch, mesh or bridge)."),
    nvswitch: bool = typer.Option(False, "--nvswitch", help="NVSwitch inside the node."),
    ib: bool = typer.Option(False, "--ib", help="InfiniBand between nodes."),
    rdma: bool = typer.Option(False, "--rdma", help="GPUDirect RDMA between nodes (InfiniBand, RoCE or EFA)."),
    fabric: Optional[str] = typer.Option(None, help="Scale-out fabric: infiniband, roce, efa, tcp or none."),
    min_scale_out_gbit: Optional[float] = typer.Option(None, help="Scale-out bandwidth per node, Gbit/s, at least."),
    provider: Optional[str] = typer.Option(None, help="Provider(s), comma-separated."),
    max_price_per_gpu_hour: Optional[float] = typer.Option(None, help="On-demand USD per GPU-hour, at most."),
    multi_node: bool = typer.Option(False, "--multi-node", help="Only offerings bookable as multi-node clusters."),
    sort: str = typer.Option("price-per-gpu", help=f"Sort by: {', '.join(SORT_KEYS)}."),
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV instead of a table."),
    extra: Optional[list[Path]] = CatalogOption,
) -> None:
    """List cloud offerings with typed interconnect fields, filtered and sorted. Unknown values say unknown."""
    db = load_db(extra or [])
    wanted = OfferingFilter(gpu=gpu, min_gpus=min_gpus, nvlink=nvlink, nvswitch=nvswitch, ib=ib, rdma=rdma,
                            fabric=fabric, min_scale_out_gbit=min_scale_out_gbit, provider=provider,
                            max_price_per_gpu_hour=max_price_per_gpu_hour, multi_node=multi_node)
    rows = sort_offerings(filter_offerings(db.offerings.values(), wanted, db), sort)
    if as_json:
        print_json([offering_dict(o) for o in rows])
    elif as_csv:
        typer.echo(catalog_csv(rows), nl=False)
    else:
        console.print(catalog_table(rows))
        if not rows:
            console.print("No offering matches these filters.")


def register(app: typer.Typer) -> None:
    """Add `catalog` to the command line."""
    app.command("catalog")(user_errors(catalog))
