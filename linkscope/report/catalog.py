"""Catalog and System views: rich tables and CSV for offerings and presets."""

from __future__ import annotations

import csv
import io
from typing import Any

from rich import box
from rich.table import Table

from linkscope.report.columns import Column

from linkscope.hardware.offering import Offering
from linkscope.hardware.serialize import offering_dict
from linkscope.hardware.system import NodeSpec, System

UNKNOWN = "[dim]unknown[/]"


def _num(value: float | None, fmt: str = "{:,.2f}", unconfirmed: bool = False) -> str:
    if value is None:
        return UNKNOWN
    text = fmt.format(value)
    return f"{text}?" if unconfirmed else text


def scale_up_text(node: NodeSpec) -> str:
    """`NVSwitch nvlink4 450 GB/s` style summary; a mesh also shows its per-pair share."""
    su = node.scale_up
    if su.kind == "host":
        return f"host memory ({su.domain_size} logical CPUs, no GPU)"
    text = f"{su.kind} {su.generation} {su.bw_gb_per_s:g} GB/s"
    if su.is_mesh:
        text += f" ({su.pair_bw_gb_per_s():.0f}/pair)"
    if su.in_network_reduction != "none":
        text += f" +{su.in_network_reduction.upper()}"
    if su.domain_size != node.gpus:
        text += f" domain {su.domain_size}"
    return text


def scale_out_text(node: NodeSpec, unconfirmed: tuple[str, ...] = ()) -> str:
    """`infiniband 8x400 Gbit/s GDR` style summary, with `?` on unconfirmed values."""
    so = node.scale_out
    if so.fabric == "none":
        return "none"
    rate = _num(so.nic_gbit_per_s, "{:g}", "scale_out.nic_gbit_per_s" in unconfirmed)
    nics = f"{so.nics}{'?' if 'scale_out.nics' in unconfirmed else ''}"
    text = f"{so.fabric} {nics}x{rate} Gbit/s"
    flags = [name for name, on in (("GDR", so.gpudirect_rdma), ("SHARP", so.sharp)) if on]
    if so.transport:
        flags.append(so.transport)
    return text + (f" {' '.join(flags)}" if flags else "")


WIDE_COLUMNS = 130
"""Below this many terminal columns the catalog table drops its low-value columns rather than fold every cell."""


def catalog_table(offerings: list[Offering], width: int = WIDE_COLUMNS, currency: str = "USD") -> Table:
    """The `linkscope catalog` table; narrower than `WIDE_COLUMNS`, only what tells offerings apart.

    A narrow terminal (80 columns, or output piped into a pager) keeps the offering, GPU count, both
    interconnects and the per-GPU price; `--json`/`--csv` carry everything.
    """
    wide = width >= WIDE_COLUMNS
    money = "$" if currency == "USD" else currency
    # Without vertical rules a narrow table gains the 6 columns its descriptions need to wrap at words.
    table = Table(title=f"{len(offerings)} offerings", header_style="bold", expand=False,
                  box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD, show_edge=wide, pad_edge=wide)
    columns: list[Column] = [
        ("offering", "left"), ("GPU", "left"), ("#", "right"), ("scale-up (per GPU, per dir)", "left"),
        ("scale-out (per node)", "left"), (f"{money}/h", "right"), (f"{money}/GPU-h", "right"),
        ("price date", "left"), ("multi-node", "left")]
    keep = range(len(columns)) if wide else (0, 2, 3, 4, 6)
    for i in keep:
        name, justify = columns[i]
        # Narrow: most offering ids fit 22 columns whole (the longest fold); the descriptions wrap at words.
        narrow_max = 17 if not wide and name.startswith("scale") else None
        table.add_column(name, justify=justify, overflow="fold",
                         min_width=None if wide or name != "offering" else 22, max_width=narrow_max,
                         no_wrap=name in ("#", f"{money}/GPU-h"))
    for o in offerings:
        cells = _catalog_cells(o)
        table.add_row(*(cells[i] for i in keep))
    return table


BOOKING_TEXT = {True: "sold in whole domains", False: "sold by the node", None: "booking unknown"}
"""How an NVLink domain that spans nodes is booked (Offering.books_whole_domain), for the scale-up cell."""


def _catalog_cells(o: Offering) -> list[str]:
    node = o.system.node
    price_unconfirmed = "price_per_hour" in o.unconfirmed
    multi = {True: "yes", False: "no", None: UNKNOWN}[o.multi_node]
    scale_up = scale_up_text(node)
    if node.domain_spans_nodes:
        scale_up += f", {BOOKING_TEXT[o.books_whole_domain]}"
    return [o.id, node.gpu.id, str(node.gpus), scale_up, scale_out_text(node, o.unconfirmed),
            _num(o.price_per_hour, unconfirmed=price_unconfirmed),
            _num(o.price_per_gpu_hour, unconfirmed=price_unconfirmed),
            price_date_text(o), multi]


def price_date_text(o: Offering) -> str:
    """The price's date; `≤2026-12-04` when it is only the day a source of unknown date was read."""
    if o.price_as_of is None:
        return UNKNOWN if o.price_per_hour is not None else "-"
    return f"≤{o.price_as_of}" if o.price_date_basis == "read" else str(o.price_as_of)


CSV_COLUMNS = ("id", "provider", "instance", "gpu", "gpus", "gpu_memory_gib", "scale_up_kind", "scale_up_generation",
               "scale_up_bw_gb_per_s", "scale_up_domain_size", "in_network_reduction", "scale_out_fabric",
               "scale_out_nics", "nic_gbit_per_s", "scale_out_total_gbit_per_s", "gpudirect_rdma", "sharp",
               "price_per_hour", "spot_price_per_hour", "price_per_gpu_hour", "price_as_of", "regions",
               "multi_node", "unconfirmed", "source", "as_of", "currency", "price_date_basis")


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    su, so = row["scale_up"], row["scale_out"]
    return {
        **{k: row[k] for k in ("id", "provider", "instance", "gpu", "gpus", "gpu_memory_gib", "price_per_hour",
                               "spot_price_per_hour", "price_per_gpu_hour", "price_as_of", "multi_node",
                               "source", "as_of", "currency", "price_date_basis")},
        "scale_up_kind": su["kind"], "scale_up_generation": su["generation"],
        "scale_up_bw_gb_per_s": su["bw_gb_per_s"], "scale_up_domain_size": su["domain_size"],
        "in_network_reduction": su["in_network_reduction"], "scale_out_fabric": so["fabric"],
        "scale_out_nics": so["nics"], "nic_gbit_per_s": so["nic_gbit_per_s"],
        "scale_out_total_gbit_per_s": so["total_gbit_per_s"], "gpudirect_rdma": so["gpudirect_rdma"],
        "sharp": so["sharp"], "regions": ";".join(row["regions"]), "unconfirmed": ";".join(row["unconfirmed"]),
    }


def catalog_csv(offerings: list[Offering]) -> str:
    """The catalog as CSV with unit-suffixed column names; unknown values are empty cells."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for o in offerings:
        writer.writerow({k: ("" if v is None else v) for k, v in _flat(offering_dict(o)).items()})
    return out.getvalue()


def systems_table(systems: list[System]) -> Table:
    """The `linkscope systems` table."""
    table = Table(title=f"{len(systems)} systems", header_style="bold")
    for name in ("id", "GPU", "#", "scale-up (per GPU, per dir)", "scale-out (per node)"):
        table.add_column(name, overflow="fold", no_wrap=name in ("id", "GPU"))
    for s in systems:
        table.add_row(s.id, s.node.gpu.id, str(s.node.gpus), scale_up_text(s.node), scale_out_text(s.node))
    return table


def _cpu_host_rows(system: System) -> list[tuple[str, str]]:
    node = system.node
    return [("device", f"CPU ({node.gpu.memory_gib:g} GiB host memory), no GPU"),
            ("slots", f"{node.gpus} logical CPUs"), ("between ranks", "host memory"),
            ("scale-out", scale_out_text(node)), ("CPU", f"{node.cpu_vendor or 'unknown'} x{node.cpu_sockets}"),
            ("note", "measured and calibrated (`bench`, `calibrate`), not modelled")]


def _gpu_rows(system: System) -> list[tuple[str, str]]:
    node, gpu = system.node, system.node.gpu
    return [
        ("GPU", f"{gpu.id} ({gpu.arch}, {gpu.form_factor}, {gpu.memory_gib:g} GiB, {gpu.hbm_gb_per_s:g} GB/s HBM)"),
        ("dense BF16/FP16 TFLOPS", f"{gpu.dense_tflops('bf16'):g}"),
        ("dense FP8 TFLOPS", _num(gpu.fp8_dense_tflops, "{:g}") if gpu.fp8_dense_tflops else "none"),
        ("GPUs per node", str(node.gpus)), ("nodes", str(system.nodes)),
        ("scale-up", scale_up_text(node)),
        ("pair bandwidth", f"{node.scale_up.pair_bw_gb_per_s():.1f} GB/s per direction"),
        ("scale-out", scale_out_text(node)),
        ("scale-out per GPU", _num(node.scale_out_gb_per_s_per_gpu(), "{:.2f} GB/s per direction")),
        ("host PCIe", str(node.host_pcie)), ("CPU", f"{node.cpu_vendor or 'unknown'} x{node.cpu_sockets}"),
    ]


def system_detail(system: System) -> Table:
    """Every field of one System, for `linkscope systems show ID` and `linkscope topo`."""
    table = Table(title=f"{system.id}: {system.name}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = _cpu_host_rows(system) if system.is_cpu_host else _gpu_rows(system)
    rows += [("description", system.description), ("source", system.source), ("as of", str(system.as_of))]
    for key, value in rows:
        table.add_row(key, value)
    return table
