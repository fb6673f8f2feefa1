"""`linkscope catalog`: which offerings have NVLink/NVSwitch inside the node and IB/RoCE/EFA between nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from linkscope.cli.common import console, print_json, user_errors
from linkscope.cli.options import (CatalogOpt, FabricOpt, GpuOpt, IbOpt, MaxPriceOpt, MinGpusOpt, MinScaleOutOpt,
                                   MultiNodeOpt, NvlinkOpt, NvswitchOpt, ProviderOpt, RdmaOpt)
from linkscope.hardware.catalog import SORT_KEYS, OfferingFilter, filter_offerings, sort_offerings
from linkscope.hardware.loader import load_db
from linkscope.hardware.serialize import offering_dict
from linkscope.report.catalog import catalog_csv, catalog_table

def catalog(
    gpu: Optional[str] = GpuOpt, min_gpus: Optional[int] = MinGpusOpt, nvlink: bool = NvlinkOpt,
    nvswitch: bool = NvswitchOpt, ib: bool = IbOpt, rdma: bool = RdmaOpt, fabric: Optional[str] = FabricOpt,
    min_scale_out_gbit: Optional[float] = MinScaleOutOpt, provider: Optional[str] = ProviderOpt,
    max_price_per_gpu_hour: Optional[float] = MaxPriceOpt, multi_node: bool = MultiNodeOpt,
    sort: str = typer.Option("price-per-gpu", help=f"Sort by: {', '.join(SORT_KEYS)}."),
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV instead of a table."),
    extra: Optional[list[Path]] = CatalogOpt,
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
