"""The interconnect comparison of `advise train|infer --compare-interconnect`: one table, and where each price
comes from."""

from __future__ import annotations

from rich import box
from rich.table import Table

from linkscope.report.columns import Column, fitted

from linkscope.advise.interconnect import InterconnectComparison, VariantResult
from linkscope.advise.price_basis import NO_PLAN, PriceBasis
from linkscope.report.advise import duration_text, layout_text
from linkscope.report.money import amount_text, current_currency, money_text


def _table(title: str, columns: list[Column]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, title_justify="left",
                  collapse_padding=True)
    for name, justify in columns:
        # One line per variant: a label or a price split over two lines reads as another row. Where even the
        # narrowed table does not fit, the interconnect's label may fold (never a figure: rich would cut it).
        table.add_column(name, justify=justify, no_wrap=name != "in the node, GB/s", overflow="fold")
    return table


TRAIN_DROP_ORDER = ("layout", "between nodes")
INFER_DROP_ORDER = ("batch", "layout", "between nodes")
"""The comparison tables' columns, least important first, as they are left out on a narrow terminal (--json
has them all); the times, speeds and prices stay."""


WIDE = 1_000
"""No narrowing (the tables' callers pass the terminal's width)."""


def _bases(c: InterconnectComparison) -> dict[PriceBasis, int]:
    """Each price basis (source and how close it is), numbered in order of first use."""
    keys: dict[PriceBasis, int] = {}
    for v in c.variants:
        keys.setdefault(v.price, len(keys) + 1)
    return keys


def _price_cell(v: VariantResult, keys: dict[PriceBasis, int]) -> str:
    if v.price.source == NO_PLAN:
        return f"- [{keys[v.price]}]"
    if v.price.usd_per_gpu_hour is None:
        return f"unknown [{keys[v.price]}]"
    return f"{amount_text(v.price.usd_per_gpu_hour)} [{keys[v.price]}]"


def _spans(c: InterconnectComparison) -> bool:
    return len({v.fabric for v in c.variants if not v.as_offered}) > 1


def price_lines(c: InterconnectComparison) -> list[str]:
    """`[1] aws/p5.48xlarge: same GPU and scale-up`, one line per price source."""
    return [f"[{n}] {basis.source}: {basis.match}" for basis, n in _bases(c).items()]


def _between(c: InterconnectComparison) -> list[Column]:
    return [("between nodes", "left")] if _spans(c) else []


def train_comparison_table(c: InterconnectComparison, width: int = WIDE) -> Table:
    """The plan's job on every interconnect: time, tokens/s per GPU, cost at each variant's price; narrowed to
    `width` columns by leaving out TRAIN_DROP_ORDER's columns in turn."""
    gpu_h = current_currency().unit("/GPU-h")
    columns: list[Column] = [("in the node, GB/s", "left"), *_between(c),
        ("layout", "left"), ("time", "right"), ("tok/s/GPU", "right"), ("cost", "right"), (gpu_h, "right")]
    keys = _bases(c)

    def build(shown: list[Column]) -> Table:
        table = _table(f"{c.gpus} x {c.gpu} on every interconnect (first row: {c.offering} as offered)", shown)
        for v in c.variants:
            cells = {"in the node, GB/s": v.scale_up, "between nodes": v.scale_out,
                     "layout": layout_text(v.parallelism),
                     "time": duration_text(v.time_to_train_s) if v.reason is None else v.reason,
                     "tok/s/GPU": "-" if v.tokens_per_s_per_gpu is None else f"{v.tokens_per_s_per_gpu:,.0f}",
                     "cost": money_text(v.cost_usd) if v.reason is None and v.cost_usd is not None else "-",
                     gpu_h: _price_cell(v, keys)}
            table.add_row(*[cells[name] for name, _ in shown], style="bold" if v.as_offered else None)
        return table

    return fitted(build, columns, TRAIN_DROP_ORDER, width)


def _forced_heading(table: Table, c: InterconnectComparison, v: VariantResult, width: int) -> None:
    """A heading row before the first row held at a wider TP."""
    if v.forced_tp and v is next(r for r in c.variants if r.forced_tp):
        table.add_section()
        table.add_row(f"[dim]held at tp {v.tp}:[/]", *[""] * (width - 1))


def infer_comparison_table(c: InterconnectComparison, budget: float, width: int = WIDE) -> Table:
    """The serving job on one node of every interconnect: layout and batch at the budget, speeds, $/Mtok;
    narrowed to `width` columns by leaving out INFER_DROP_ORDER's columns in turn."""
    return fitted(lambda shown: _infer_comparison(c, budget, shown), _infer_columns(c), INFER_DROP_ORDER, width)


def _infer_columns(c: InterconnectComparison) -> list[Column]:
    mtok, gpu_h = current_currency().unit("/Mtok"), current_currency().unit("/GPU-h")
    return [("in the node, GB/s", "left"), *_between(c), ("layout", "left"), ("batch", "right"),
            ("tok/s/user", "right"), ("tok/s/GPU", "right"), (mtok, "right"), (gpu_h, "right"),
            ("vs offered", "right")]


def _infer_comparison(c: InterconnectComparison, budget: float, columns: list[Column]) -> Table:
    mtok, gpu_h = current_currency().unit("/Mtok"), current_currency().unit("/GPU-h")
    table = _table(f"{c.gpu} serving at {budget:g} tokens/s per user on every interconnect (first row: {c.offering} "
                   "as offered; vs offered: tokens/s per GPU against it)", columns)
    keys = _bases(c)
    # Each block (the free choice, then TP held) against its own row as offered.
    bases = {r.forced_tp: r.tokens_per_s_per_gpu for r in c.variants if r.as_offered}
    for v in c.variants:
        _forced_heading(table, c, v, len(columns))
        base = bases.get(v.forced_tp)
        ratio = "-" if v.as_offered or not base or v.tokens_per_s_per_gpu is None else \
            f"{v.tokens_per_s_per_gpu / base:.2f}x"
        layout = "-" if v.tp is None else f"tp{v.tp}" + (f" pp{v.pp}" if (v.pp or 1) > 1 else "")
        cells = {"in the node, GB/s": v.scale_up, "between nodes": v.scale_out, "layout": layout if v.reason is None
                 else v.reason, "batch": "-" if v.batch is None else str(v.batch),
                 "tok/s/user": "-" if v.tokens_per_s_per_user is None else f"{v.tokens_per_s_per_user:.0f}",
                 "tok/s/GPU": "-" if v.tokens_per_s_per_gpu is None else f"{v.tokens_per_s_per_gpu:.0f}",
                 mtok: "-" if v.usd_per_million_tokens is None else amount_text(v.usd_per_million_tokens),
                 gpu_h: _price_cell(v, keys), "vs offered": ratio}
        table.add_row(*[cells[name] for name, _ in columns], style="bold" if v.as_offered else None)
    return table
