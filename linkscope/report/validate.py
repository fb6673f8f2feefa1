"""Terminal view of `linkscope validate`: errors per kind, per source and (on request) per entry."""

from __future__ import annotations

from rich import box
from rich.table import Table

from linkscope.model.fidelity.validate import Validation, coverage_pct, verdicts


def kinds_table(v: Validation) -> Table:
    """Median and maximum absolute error per kind, in-sample and leave-one-source-out; below it the share of each
    kind inside its packaged p10..p90 ranges, and the disaggregated-serving verdicts."""
    table = Table(title="Model error on the evidence set, per kind (absolute %, LOSO = leave one source out, "
                        "LORO = leave one regime out)", header_style="bold")
    for name in ("kind", "entries", "in-sample median", "LOSO median", "LOSO max", "LORO median"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for kind, s in v.kinds.items():
        loro = v.loro_median_pct(kind)
        table.add_row(kind, str(s.n), f"{s.in_sample_median_pct:.1f}%", f"{s.loso_median_pct:.1f}%",
                      f"{s.loso_max_pct:.1f}%", "-" if loro is None else f"{loro:.1f}%")
    for kind in v.empty_kinds:  # listed so that the kind is seen to exist; why it is empty goes below the table
        if kind not in v.kinds:
            table.add_row(kind, "0", "-", "-", "-", "-")
    covered = [f"{kind} {c:.0f}%" for kind in v.kinds if (c := coverage_pct(v, kind)) is not None]
    caption = "inside the packaged p10..p90 ranges: " + ", ".join(covered)
    if "disaggregated" in v.kinds:
        counts = verdicts(v)
        caption += (f"; disaggregated vs colocated: {counts['right']} of {counts['n']} published verdicts called the "
                    "same way")
    for kind, why in v.empty_kinds.items():
        if kind not in v.kinds:
            caption += f"\n{kind}: {why}"
    table.caption = caption
    return table


def regimes_table(v: Validation) -> Table:
    """The errors per regime, each predicted with the constants fitted on everything outside it."""
    table = Table(title="Per regime (fitted without the regime's entries, whatever their source)",
                  header_style="bold", box=box.SIMPLE_HEAD)
    for name in ("regime", "kind", "n", "sources", "in-sample", "LORO median", "LORO max"):
        table.add_column(name, justify="left" if name in ("regime", "kind") else "right",
                         no_wrap=name in ("regime", "kind"))
    for r in v.regimes:
        table.add_row(r["regime"], r["kind"], str(r["n"]), str(r["sources"]), f"{r['in_sample_median_pct']:.1f}%",
                      f"{r['loro_median_pct']:.1f}%", f"{r['loro_max_pct']:.1f}%")
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
