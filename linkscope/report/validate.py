"""Terminal view of `linkscope validate`: errors per kind, per source and (on request) per entry."""

from __future__ import annotations

from rich import box
from rich.table import Table

from linkscope.model.fidelity.validate import Validation, coverage_pct, half_width_pct, verdicts, worst_regimes


def kinds_table(v: Validation) -> Table:
    """Median and maximum absolute error per kind, in-sample, leave-one-source-out and leave-one-regime-out; the
    coverage and median half-width of the p10..p90 ranges each entry would have had without its own source; below
    it the disaggregated-serving verdicts."""
    # Eight columns: no vertical rules and one space between them, so that the table stays whole at 80 columns.
    table = Table(title="Model error on the evidence set, per kind (absolute %, LOSO = leave one source out, "
                        "LORO = leave one regime out)", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, padding=(0, 0, 0, 1))
    for name in ("kind", "entries", "in-sample\nmedian", "LOSO\nmedian", "LOSO\nmax", "LORO\nmedian", "cover-\nage",
                 "half-\nwidth"):
        table.add_column(name, justify="left" if name == "kind" else "right", no_wrap=True)
    for kind, s in v.kinds.items():
        loro = v.loro_median_pct(kind)
        table.add_row(kind, str(s.n), f"{s.in_sample_median_pct:.1f}%", f"{s.loso_median_pct:.1f}%",
                      f"{s.loso_max_pct:.1f}%", _pct(loro), _pct(coverage_pct(v, kind)), _pct(half_width_pct(v, kind)))
    for kind in v.empty_kinds:  # listed so that the kind is seen to exist; why it is empty goes below the table
        if kind not in v.kinds:
            table.add_row(kind, "0", "-", "-", "-", "-", "-", "-")
    caption = ("coverage: share of entries inside the p10..p90 range made without their own source; half-width: "
               "median, % of the central value")
    if "disaggregated" in v.kinds:
        counts = verdicts(v)
        caption += (f"; disaggregated vs colocated: {counts['right']} of {counts['n']} published verdicts called the "
                    "same way")
    for kind, why in v.empty_kinds.items():
        if kind not in v.kinds:
            caption += f"\n{kind}: {why}"
    table.caption = caption
    return table


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}%"


def regimes_table(v: Validation) -> Table:
    """The errors per regime, each predicted with the constants fitted on everything outside it, and the coverage
    and half-width of its entries' ranges."""
    table = Table(title="Per regime (fitted without the regime's entries, whatever their source)",
                  header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 0, 0, 1))
    # The in-sample error is in --json; the table keeps to 80 columns.
    for name in ("regime", "kind", "n", "src", "LORO\nmedian", "LORO\nmax", "cover-\nage", "half-\nwidth"):
        table.add_column(name, justify="left" if name in ("regime", "kind") else "right", no_wrap=True)
    for r in v.regimes:
        table.add_row(r["regime"], r["kind"], str(r["n"]), str(r["sources"]), f"{r['loro_median_pct']:.1f}%",
                      f"{r['loro_max_pct']:.0f}%", _pct(r["coverage_pct"], 0), _pct(r["half_width_pct"], 0))
    return table


def worst_regimes_lines(v: Validation) -> list[str]:
    """Per kind, the regimes with the largest out-of-sample error and the least coverage: the next fix's target."""
    lines = []
    for kind, worst in worst_regimes(v).items():
        errors = ", ".join(f"{r['regime']} {r['loro_median_pct']:.1f}%" for r in worst["largest_error"])
        covers = ", ".join(f"{r['regime']} {r['coverage_pct']:.0f}%" for r in worst["least_coverage"])
        lines.append(f"{kind}: largest LORO error: {errors}; least coverage: {covers}")
    return ["Worst regimes", *lines] if lines else []


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
