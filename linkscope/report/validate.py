"""Terminal view of `linkscope validate`: errors per kind, per source and (on request) per entry."""

from __future__ import annotations

from rich import box
from rich.table import Table

from linkscope.model.fidelity.validate import Validation


def kinds_table(v: Validation) -> Table:
    """Median and maximum absolute error per kind, in-sample and leave-one-source-out."""
    table = Table(title="Model error on the evidence set, per kind (absolute %, LOSO = leave one source out)",
                  header_style="bold")
    for name in ("kind", "entries", "in-sample median", "LOSO median", "LOSO max"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for kind, s in v.kinds.items():
        table.add_row(kind, str(s.n), f"{s.in_sample_median_pct:.1f}%", f"{s.loso_median_pct:.1f}%",
                      f"{s.loso_max_pct:.1f}%")
    for regime, s in v.regimes.items():
        table.add_row(f"  training, {regime}", str(s.n), f"{s.in_sample_median_pct:.1f}%",
                      f"{s.loso_median_pct:.1f}%", f"{s.loso_max_pct:.1f}%")
    return table


def sources_table(v: Validation) -> Table:
    """The same errors per source."""
    # Source ids are what `--entries` and evidence.yaml name: kept whole, the headers wrap instead.
    table = Table(title="Per source", header_style="bold", box=box.SIMPLE_HEAD)
    for name in ("source", "kind", "entries", "in-sample median", "LOSO median", "LOSO max"):
        table.add_column(name, justify="left" if name in ("source", "kind") else "right", no_wrap=name == "source")
    for s in v.sources:
        table.add_row(s["source"], s["kind"], str(s["n"]), f"{s['in_sample_median_pct']:.1f}%",
                      f"{s['loso_median_pct']:.1f}%", f"{s['loso_max_pct']:.1f}%")
    return table


def entries_table(v: Validation) -> Table:
    """Every entry: measured, predicted in-sample and with its source left out, signed errors."""
    table = Table(title="Per entry (signed error: + means the model predicts more than was measured)",
                  header_style="bold")
    for name in ("source", "entry", "measured", "in-sample", "error", "LOSO", "LOSO error"):
        table.add_column(name, justify="left" if name in ("source", "entry") else "right")
    for r in v.entries:
        table.add_row(r.source, r.label, f"{r.measured:.4g}", f"{r.in_sample:.4g}", f"{r.in_sample_err_pct:+.1f}%",
                      f"{r.loso:.4g}", f"{r.loso_err_pct:+.1f}%")
    return table
