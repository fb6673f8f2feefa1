"""Options several commands share: the catalog filters (`catalog`, `advise`), `--catalog FILE`, and one valid
range per numeric option so that `--seq-len` means the same thing (and fails the same way) in every command."""

from __future__ import annotations

import typer

from linkscope.cli.common import check_range

_COUNT = 10_000_000  # GPUs, nodes, parallel sizes: far beyond any machine
_LENGTH = 100_000_000  # sequences, tokens: far beyond any real job, keeps the layout search bounded
_RATE = 1e12  # tokens/s, requests/s

# flag -> (lowest, highest) accepted value. 0 is a value, never "not given": it must lie in range.
OPTION_RANGES: dict[str, tuple[float, float]] = {
    "--gpus": (1, _COUNT), "--nodes": (1, _COUNT), "--tp": (1, _COUNT), "--pp": (1, _COUNT), "--dp": (1, _COUNT),
    "--cp": (1, _COUNT), "--batch": (1, _LENGTH), "--global-batch": (1, _LENGTH), "--micro-batch": (1, _LENGTH),
    "--seq-len": (1, _LENGTH), "--input-tokens": (1, _LENGTH), "--output-tokens": (1, _LENGTH),
    "--latency-budget": (1e-9, _RATE), "--qps": (1e-9, _RATE),
}


def check_option(value: float | None, flag: str) -> None:
    """UserError unless `value` is None (not given) or inside `flag`'s one range."""
    low, high = OPTION_RANGES[flag]
    check_range(value, flag, low, high)


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
