"""Options several commands share: the catalog filters (`catalog`, `advise`) and `--catalog FILE`."""

from __future__ import annotations

import typer

# The catalog filters: `linkscope catalog` and `linkscope advise` take the same ones.
GpuOpt = typer.Option(None, "--gpu", help="GPU id, alias or family (H100 matches every H100 variant).")
MinGpusOpt = typer.Option(None, "--min-gpus", help="At least this many GPUs per node.")
NvlinkOpt = typer.Option(False, "--nvlink", help="Any NVLink inside the node.")
NvswitchOpt = typer.Option(False, "--nvswitch", help="NVSwitch inside the node.")
IbOpt = typer.Option(False, "--ib", help="InfiniBand between nodes.")
RdmaOpt = typer.Option(False, "--rdma", help="GPUDirect RDMA between nodes (InfiniBand, RoCE or EFA).")
FabricOpt = typer.Option(None, "--fabric", help="Scale-out fabric: infiniband, roce, efa, tcp or none.")
MinScaleOutOpt = typer.Option(None, "--min-scale-out-gbit", help="Scale-out Gbit/s per node, at least.")
ProviderOpt = typer.Option(None, "--provider", help="Provider(s), comma-separated.")
MaxPriceOpt = typer.Option(None, "--max-price-per-gpu-hour", help="On-demand USD per GPU-hour, at most.")
MultiNodeOpt = typer.Option(False, "--multi-node", help="Only offerings bookable as multi-node clusters.")
CatalogOpt = typer.Option(None, "--catalog", help="Extra data file(s) with offerings, presets or GPUs.")
