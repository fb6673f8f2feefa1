"""Terminal views of `advise train`, `advise infer` and `plan`: rich tables sized for a 100-column terminal."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table

from linkscope.report.columns import Column, fitted

from linkscope.advise.bottleneck import bottleneck_short
from linkscope.advise.infer import InferOption
from linkscope.advise.launch import LaunchPlan
from linkscope.advise.placement import DIMS, Placement, group_dims
from linkscope.advise.plan import PlanResult
from linkscope.advise.train import TrainAdvice, TrainOption
from linkscope.model.step.layout import Layout
from linkscope.model.ranges.mfu import PRECISION_NAMES, MfuPeak
from linkscope.report.money import UNKNOWN, amount_text, current_currency, money_text
from linkscope.report.predict import link_text, range_text

def duration_text(seconds: float | None) -> str:
    """`42 s`, `18 min`, `5.3 h`, `12.4 d`, `2.1 y`."""
    if seconds is None:
        return UNKNOWN
    for limit, unit, scale in ((120, "s", 1), (7200, "min", 60), (3 * 86400, "h", 3600), (730 * 86400, "d", 86400)):
        if seconds < limit:
            value = seconds / scale
            whole = value >= 100 or unit in ("s", "min") or value == int(value)
            return f"{value:.0f} {unit}" if whole else f"{value:.1f} {unit}"
    return f"{seconds / (365 * 86400):.1f} y"


def rate_text(per_s: float | None) -> str:
    """`412k`, `3.1M` tokens/s."""
    if per_s is None:
        return UNKNOWN
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if per_s >= scale:
            return f"{per_s / scale:.3g}{suffix}"
    return f"{per_s:.3g}"


def count_text(value: float) -> str:
    """`2B`, `300B`, `1.5T`, as token counts are written."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def layout_text(par: Layout | None) -> str:
    """`tp8 pp4 dp2`, with cp and interleave when used."""
    if par is None:
        return "-"
    parts = [f"tp{par.tp}", f"pp{par.pp}", f"dp{par.dp}"]
    if par.cp > 1:
        parts.append(f"cp{par.cp}")
    if par.interleave > 1:
        parts.append(f"v{par.interleave}")
    return " ".join(parts)


def layout_detail(par: Layout) -> str:
    """Every layout choice in words, for the winner's paragraph."""
    return (f"TP {par.tp} x PP {par.pp} x DP {par.dp}" + (f" x CP {par.cp}" if par.cp > 1 else "")
            + f", interleave {par.interleave}, micro-batch {par.micro_batch}, recompute {par.recompute}, "
              f"ZeRO-{par.zero}" + (", sequence parallel" if par.sequence_parallel else "")
            + (f", experts EP {par.ep} x ETP {par.etp}" if par.ep * par.etp > 1 else ""))


WIDE_COLUMNS = 120
"""Below this terminal width the ranking tables drop the step time, MFU and bottleneck columns (the winner's
paragraph still gives them) rather than fold every cell."""


def _table(title: str, columns: list[Column], ids: Sequence[str] = ()) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, title_justify="left")
    for name, justify in columns:
        # Offering ids run to 40 characters; below 20 they fold into unreadable pieces. Given the ids shown, the
        # column keeps the longest whole (an id cut in two cannot be pasted back into --system): `fitted` leaves
        # other columns out instead.
        whole = name == "offering" and bool(ids)
        width = max(20, max(len(i) for i in ids)) if whole else 20 if name == "offering" else None
        # A layout split over two lines (`tp1 pp1` / `dp8`) reads as two rows; a link name cut in two is lost.
        table.add_column(name, justify=justify, overflow="ellipsis" if whole else "fold", min_width=width,
                         no_wrap=whole or name in ("layout", "link", "naive link"))
    return table


def _narrow(columns: list[Column], width: int) -> list[Column]:
    if width >= WIDE_COLUMNS:
        return columns
    return [c for c in columns if c[0] not in ("step", "bottleneck", "MFU")]


def _cells(columns: list[Column], values: dict[str, str]) -> list[str]:
    return [values[name] for name, _ in columns]


def train_table(rows: list[TrainOption], title: str, width: int = WIDE_COLUMNS, versus: TrainOption | None = None,
                start: int = 1) -> Table:
    """Feasible options, one row each, in ranking order, numbered from `start`; narrower than `WIDE_COLUMNS`,
    without step, MFU and bottleneck. `versus` (the frontier's cheapest plan): a column says what each row buys
    over it."""
    columns = _narrow([("#", "right"), ("offering", "left"), ("GPUs", "right"), ("layout", "left"),
                       ("step", "right"), ("time", "right"), ("p10..p90", "right"), ("cost", "right"),
                       ("MFU", "right"), ("bottleneck", "left")], width)
    if versus is not None:
        # The frontier's own column pushes a 100-column table over; the shared range moves under it (spread_note).
        columns = [c for c in columns if width >= WIDE_COLUMNS or c[0] != "p10..p90"] + [("vs #1", "right")]

    def build(shown: list[Column]) -> Table:
        table = _table(title, shown, [r.offering + ("*" if r.measured_profile else "") for r in rows])
        # Two spaces between columns instead of three: the frontier's extra column then fits 100 columns unfolded.
        table.collapse_padding = versus is not None
        for i, r in enumerate(rows, start):
            cost = money_text(r.cost_usd)
            if r.price_unconfirmed:
                cost += "?"
            mark = "*" if r.measured_profile else ""
            table.add_row(*_cells(shown, {
                "#": str(i), "offering": r.offering + mark, "GPUs": gpus_text(r),
                "layout": layout_text(r.parallelism), "step": _seconds(r.step_time_s or 0.0),
                "time": duration_text(r.time_to_train_s),
                "p10..p90": _spread(r.time_to_train_s, r.time_to_train_s_range), "cost": cost,
                "MFU": _mfu_cell(r), "bottleneck": _short(r),
                "vs #1": _versus(r, versus) if versus is not None else ""}))
        return table

    return fitted(build, columns, TRAIN_DROP_ORDER if width < WIDE_COLUMNS else (), width)


TRAIN_DROP_ORDER = ("p10..p90", "layout", "vs #1")
"""The training table's columns, least important first, as they are left out where the ids would not fit whole
(the winner's paragraph and --json give the layout)."""


def gpus_text(r: TrainOption) -> str:
    """`64`, or `64/72` where whole NVLink domains are booked around the GPUs a plan runs on."""
    booked = (r.booked_nodes or 0) * r.gpus_per_node
    return f"{r.gpus}/{booked}" if r.gpus is not None and booked > r.gpus else str(r.gpus)


def _versus(row: TrainOption, first: TrainOption) -> str:
    """What the plan buys over the first row: `2.1x +4%` (2.1 times as fast, 4% dearer); `-` on the first."""
    speedup = (first.time_to_train_s or 0.0) / row.time_to_train_s if row.time_to_train_s else 0.0
    return _ratio_text(row is first, speedup, row.cost_usd, first.cost_usd)


def _ratio_text(same: bool, speedup: float, cost: float | None, first_cost: float | None) -> str:
    """`2.1x +4%`: as fast as the first row times 2.1, 4% dearer; `0.5x slower`; `-` for the first row itself."""
    if same or speedup <= 0:
        return "-"
    text = f"{speedup:.1f}x" if speedup >= 1.0 else f"{1.0 / speedup:.1f}x slower"
    if cost is None or not first_cost:
        return text
    return f"{text} {cost / first_cost - 1.0:+.0%}"


def spread_note(rows: list[TrainOption], width: int) -> str | None:
    """Below the frontier table on a narrow terminal: the p10..p90 its rows share, or where to find each."""
    if width >= WIDE_COLUMNS or not rows:
        return None
    spreads = {_spread(r.time_to_train_s, r.time_to_train_s_range) for r in rows}
    if len(spreads) == 1:
        return f"p10..p90 of each time and cost: {spreads.pop()}"
    return f"p10..p90 of each time and cost: --json, or a terminal of {WIDE_COLUMNS} columns"


def _spread(value: float | None, span: list[float] | None) -> str:
    """Time and cost share the same relative range: one column shows it for both."""
    return range_text(value or 0.0, span or [])


def _short(r: TrainOption) -> str:
    if r.breakdown is None or r.step_time_s is None:
        return "-"
    return bottleneck_short(r.breakdown, r.step_time_s)


def reasons_table(rows: list[TrainOption] | list[InferOption], title: str) -> Table:
    """Options that cannot run the job, with the reason."""
    table = _table(title, [("offering", "left"), ("reason", "left")])
    for r in rows:
        table.add_row(r.offering, r.reason or "-")
    return table


def train_header(advice: TrainAdvice, frontier: bool = False) -> str:
    """What was asked, including every default that was filled in (the deadline above all: it decides row 1)."""
    req = advice.request
    batch_tokens = req.global_batch * req.seq_len
    default = " (default ~4M tokens; --global-batch to change)" if req.global_batch_is_default else ""
    limits = [limits_text(advice)]
    if req.limits.budget_usd is not None:
        limits.append(f"budget {money_text(req.limits.budget_usd)}")
    ranking = "the time-cost frontier" if frontier else f"ranked by total {req.objective.value}"
    tune = (f", LoRA fine-tune (rank {req.peft.rank} on {req.peft.targets}, {req.peft.base_precision} frozen base)"
            if req.peft else "")
    return (f"[bold]{req.model.id}[/]{tune}, {count_text(req.tokens)} tokens, {req.precision}, "
            f"{req.gpus.describe()}: "
            f"{ranking}\n{', '.join(limits)}\n"
            f"global batch {req.global_batch} x {req.seq_len} = {batch_tokens / 1e6:.1f}M tokens per step{default}\n"
            f"{framework_text(req.framework)}")


def framework_text(framework: str) -> str:
    """The framework a plan assumes, saying when it is the default."""
    if framework != "auto":
        return f"framework {framework}"
    return ("framework by ZeRO stage: megatron for 0-1, deepspeed for 2 (fsdp with pipeline stages), fsdp for 3 "
            "(--framework to choose)")


def limits_text(advice: TrainAdvice) -> str:
    """`deadline 90 d (the default; ...), met when a plan's p90 time is within it`, `deadline 30 d, met ...`, or
    `no deadline`; the deadline in the unit it was given."""
    limits = advice.request.limits
    if limits.deadline_s is None:
        return "no deadline"
    default = " (the default; --deadline to change, --deadline none to remove)" if limits.deadline_is_default else ""
    return f"deadline {limits.deadline_text()}{default}, met when a plan's p90 time is within it"


def no_plan_text(advice: TrainAdvice) -> str | None:
    """Why no plan qualifies, naming the nearest one: `no plan meets the deadline (90 d) at its p90: the fastest
    takes 141 d (p90 160 d) on X (1024 GPUs)`; None when no offering can run the job at all (the reasons table
    says why)."""
    limits = advice.request.limits
    fastest = advice.fastest_plan()
    if fastest is None:
        return None
    if limits.deadline_s is not None and fastest.p90_time_s > limits.deadline_s:
        return (f"no plan meets the deadline ({limits.deadline_text()}) at its p90: the fastest takes "
                f"{duration_text(fastest.time_to_train_s)} (p90 {duration_text(fastest.p90_time_s)}) on "
                f"{fastest.offering} ({fastest.gpus} GPUs, "
                f"{'no known price' if fastest.cost_usd is None else money_text(fastest.cost_usd)})")
    cheapest = advice.cheapest_plan()
    budget = money_text(limits.budget_usd)
    if cheapest is None:
        return f"no plan fits the budget ({budget}): no offering that runs the job has a known price"
    if limits.budget_usd is not None and (cheapest.cost_usd or 0.0) > limits.budget_usd:
        return (f"no plan fits the budget ({budget}): the cheapest costs {money_text(cheapest.cost_usd)} on "
                f"{cheapest.offering} ({cheapest.gpus} GPUs, {duration_text(cheapest.time_to_train_s)})")
    within = advice.cheapest_plan(within_deadline=True)
    if within is None:
        return f"no plan meets both the deadline and the budget ({budget})"
    return (f"no plan meets both the deadline and the budget ({budget}): within the deadline the cheapest costs "
            f"{money_text(within.cost_usd)} on {within.offering} ({within.gpus} GPUs)")


def evidence_lines(rows: Sequence[TrainOption | InferOption]) -> list[str]:
    """One line per GPU family or fabric class shown without evidence: its rows rank on the central value."""
    missing = dict.fromkeys(n for r in rows for n in r.notes if n.startswith("no ") and " evidence for " in n)
    return [f"note: {n}; ranked on the central value" for n in missing]


def profile_lines(rows: list[TrainOption]) -> list[str]:
    """One line per saved profile an offering's ranking used or could not use (`*` marks the used ones)."""
    return [f"{r.offering}{'*' if r.measured_profile else ''}: {note}" for r in rows for note in r.profile_notes]


def _mfu_cell(r: TrainOption) -> str:
    """`49% FP8`: the share and the format of the dense peak it is of (the winner's lines name the peak)."""
    if not r.mfu or not r.mfu_peak_tflops:
        return "-"
    return f"{r.mfu:.0%} {PRECISION_NAMES.get(r.mfu_precision or '', '')}".rstrip()


def _mfu_text(r: TrainOption) -> str:
    """`48.5% of 5,033 TFLOP/s FP8 dense`."""
    if not r.mfu or not r.mfu_peak_tflops:
        return "-"
    return MfuPeak(gpu=r.gpu, family="", precision=r.mfu_precision or "", tflops=r.mfu_peak_tflops).text(r.mfu)


def winner_text(r: TrainOption, heading: str = "Best") -> str:
    """The best option in full sentences (a feasible option: every field is set)."""
    if r.parallelism is None:
        return f"{r.offering}: {r.reason}"
    nodes = f"{r.nodes} node{'s' if (r.nodes or 0) > 1 else ''} x {r.gpus_per_node} {r.gpu}"
    if (r.booked_nodes or 0) > (r.nodes or 0):
        nodes += f", {r.booked_nodes} booked"
    lines = [f"[bold]{heading}: {r.offering}[/] ({nodes})",
             f"  layout: {layout_detail(r.parallelism)}",
             f"  {r.step_time_s:.2f} s per step, {rate_text(r.tokens_per_s)} tokens/s, MFU {_mfu_text(r)}, "
             f"{r.memory_gib_per_gpu:.0f} of {r.memory_gib_available:.0f} GiB per GPU",
             f"  time to train {duration_text(r.time_to_train_s)}, cost {money_text(r.cost_usd)}"
             + (f" at {money_text(r.price_per_hour)} per node-hour" if r.price_per_hour is not None else ""),
             f"  bottleneck: {r.bottleneck_detail}"]
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


def infer_table(rows: list[InferOption], title: str, with_qps: bool, versus: InferOption | None = None,
                start: int = 1, width: int = WIDE_COLUMNS) -> Table:
    """Feasible serving options in ranking order, numbered from `start`; `versus` (the frontier's cheapest plan):
    a column says how much faster each row serves a user than it, and how much dearer a token is. Where the table
    would not fit `width`, the least important columns are left out in turn (p10..p90, which `infer_spread_note`
    gives below, then batch, replicas and nodes, all in --json) so that ids, prices and speeds stay whole."""
    columns: list[Column] = [("#", "right"), ("offering", "left"), ("layout", "left"), ("batch", "right"),
               ("tok/s\n/user", "right"), ("tok/s\n/GPU", "right"), (current_currency().unit("/Mtok"), "right"),
               ("p10..p90", "right")]
    if with_qps:
        columns += [("repl", "right"), ("nodes", "right"), (current_currency().unit("/h"), "right")]
    if versus is not None:
        columns.append(("vs #1", "right"))

    def build(shown: list[Column]) -> Table:
        table = _table(title, shown, [r.offering for r in rows])
        table.collapse_padding = versus is not None
        for i, r in enumerate(rows, start):
            price = UNKNOWN if r.usd_per_million_tokens is None else amount_text(r.usd_per_million_tokens)
            layout = (f"tp{r.tp}" + (f" pp{r.pp}" if (r.pp or 1) > 1 else "")
                      + (f" ep{r.ep}" if (r.ep or 1) > 1 else ""))
            speedup = (r.tokens_per_s_per_user or 0.0) / ((versus.tokens_per_s_per_user if versus else None) or 1.0)
            table.add_row(*_cells(shown, {
                "#": str(i), "offering": r.offering, "layout": layout, "batch": str(r.batch),
                "tok/s\n/user": f"{r.tokens_per_s_per_user:.0f}", "tok/s\n/GPU": f"{r.tokens_per_s_per_gpu:.0f}",
                current_currency().unit("/Mtok"): price,
                "p10..p90": _spread(r.usd_per_million_tokens, r.usd_per_million_tokens_range),
                "repl": str(r.replicas), "nodes": str(r.nodes_needed),
                current_currency().unit("/h"): money_text(r.fleet_usd_per_hour),
                "vs #1": "" if versus is None else _ratio_text(r is versus, speedup, r.usd_per_million_tokens,
                                                               versus.usd_per_million_tokens)}))
        return table

    return fitted(build, columns, INFER_DROP_ORDER if width < WIDE_COLUMNS else (), width)


INFER_DROP_ORDER = ("p10..p90", "batch", "repl", "nodes", "layout")
"""The serving table's columns, least important first, as they are left out on a narrow terminal."""


def infer_spread_note(rows: list[InferOption], width: int, with_qps: bool) -> str | None:
    """Below a narrow serving table that left p10..p90 out: the range its rows share, or where to find each."""
    if width >= WIDE_COLUMNS or not rows:
        return None
    spreads = {_spread(r.usd_per_million_tokens, r.usd_per_million_tokens_range) for r in rows}
    if len(spreads) == 1:
        return f"p10..p90 of each price and speed: {spreads.pop()}"
    return f"p10..p90 of each price and speed: --json, or a terminal of {WIDE_COLUMNS} columns"


def rank_map_table(p: Placement, max_nodes: int, max_gpus: int = 8) -> Table:
    """Nodes as rows, GPUs as columns; each cell the rank and its coordinates (dims of size 1 left out).
    Large Systems show their first nodes and GPUs only (72-GPU NVL72 nodes would not fit a terminal)."""
    gpn = min(p.system.node.gpus, max_gpus)
    dims = [d for d in DIMS if p.par.size(d) > 1]
    shown = min(p.system.nodes, max_nodes)
    cut = [f"first {shown} of {p.system.nodes} nodes" if shown < p.system.nodes else "",
           f"first {gpn} of {p.system.node.gpus} GPUs per node" if gpn < p.system.node.gpus else ""]
    cut_text = "; ".join(c for c in cut if c)
    title = f"rank map, order {p.order_text} (fastest first)" + (f"; {cut_text} (--json has all)" if cut_text else "")
    table = _table(title, [("node", "left"), *((f"GPU{g}", "left") for g in range(gpn))])
    by_slot = {(int(p.node[r]), int(p.gpu[r])): r for r in range(p.par.world)}
    for n in range(shown):
        cells = []
        for g in range(gpn):
            r = by_slot[(n, g)]
            coords = " ".join(f"{d[0]}{int(p.coords[d][r])}" for d in dims)
            cells.append(f"r{r}\n[dim]{coords}[/]")
        table.add_row(f"node{n}", *cells)
    return table


def groups_table(result: PlanResult) -> Table:
    """Each kind of group under both placements: nodes spanned, where its traffic goes (or what bounds it), and
    its time: on the step's critical path (with a model) or for one 64 MiB collective (without)."""
    per = "on the critical path per step" if result.basis == "step" else "per 64 MiB op"
    table = _table(f"collectives, time {per}: {result.placement.order_text} vs naive {result.baseline.order_text}",
                   [("group", "left"), ("ranks", "right"), ("nodes", "right"), ("link", "left"),
                    ("time", "right"), ("naive nodes", "right"), ("naive link", "left"), ("naive time", "right")])
    for name, a in result.cost.groups.items():
        b = result.baseline_cost.groups[name]
        if a.ranks <= 1:
            continue
        # The data-parallel group spans the context-parallel ranks too: name every dimension it spans.
        dims = group_dims(name) if name in DIMS else (name,)
        label = " x ".join(d.upper() for d in dims if d not in DIMS or result.request.par.size(d) > 1)
        table.add_row(label or name.upper(), str(a.ranks), str(a.nodes), link_text(a.tier), _seconds(a.time_s),
                      str(b.nodes), link_text(b.tier), _seconds(b.time_s))
    return table


def _seconds(value: float) -> str:
    """`12.3 ms`, `4.56 s`, `123 s`."""
    return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"


def plan_summary(result: PlanResult) -> str:
    """The verdict: predicted step times (with a model) or collective times (without), and the rails."""
    lines = [f"placement: order {result.placement.order_text} ({result.order_reason})"]
    step, naive = result.step_time_s, result.baseline_step_time_s
    if result.basis == "step" and step is not None and naive is not None:
        lines.append(f"predicted step: {step:.4g} s{_versus_predict(result)}")
        lines.append(f"naive {result.baseline.order_text}: {naive:.4g} s ({naive - step:+.3g} s, "
                     f"{naive / step - 1:+.0%})")
        if result.layout:
            lines.append(f"step model's layout: {layout_detail(result.layout)}")
        job = result.request.job
        if job is not None:
            default = " (the usual one for this ZeRO stage; --framework to choose)" if job.framework == "auto" else ""
            lines.append(f"job: global batch {job.global_batch} x seq len {job.seq_len} = "
                         f"{job.global_batch * job.seq_len / 1e6:.1f}M tokens per step, {job.precision}, "
                         f"framework {result.framework}{default}")
    else:
        slower = [f"{d.upper()} {result.baseline_cost.groups[d].time_s / c.time_s:.1f}x"
                  for d, c in result.cost.groups.items() if c.time_s > 0]
        lines.append(f"naive placement, time for the same bytes: {', '.join(slower)} "
                     "(give --model for predicted step times)")
    rails = result.rails()
    crossing, same = rails["placement"]
    if crossing:
        lines.append(f"pipeline neighbours across nodes on the same rail: {same} of {crossing} pairs")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def _versus_predict(result: PlanResult) -> str:
    """How the step relates to `predict train`'s (Megatron-Core's order): the same, or that plus each group's move."""
    megatron = result.megatron_cost
    if megatron is None or megatron.step_time_s is None:
        return ""
    moves = result.moves()
    if not moves:
        return f", as `predict train` gives it (Megatron-Core's order {megatron.order})"
    parts = ", ".join(f"{g.upper()} {_signed_seconds(d)}" for g, d in moves.items())
    return f" = `predict train`'s {megatron.step_time_s:.4g} s (order {megatron.order}) + the groups moved: {parts}"


def _signed_seconds(value: float) -> str:
    """`+12.3 ms`, `-4.56 s`."""
    return ("+" if value >= 0 else "-") + _seconds(abs(value))


def launch_text(plan: LaunchPlan, max_nodes: int) -> str:
    """Hostfile, per-node CUDA_VISIBLE_DEVICES and torchrun lines, Megatron arguments."""
    shown = plan.torchrun[:max_nodes]
    more = len(plan.torchrun) - len(shown)
    lines = ["[bold]hostfile[/] (DeepSpeed/MPI style):", *("  " + h for h in plan.hostfile.splitlines()[:max_nodes])]
    if more:
        lines.append(f"  ... {more} more")
    lines += ["[bold]per node[/] (torchrun numbers ranks node-major: rank = node x GPUs per node + local rank):",
              *("  " + t for t in shown)]
    if more:
        lines.append(f"  ... {more} more (--json has every node)")
    lines += ["[bold]Megatron-LM[/]: " + plan.megatron_args + f"  (rank order {plan.order}, "
              "Megatron-Core `order=`)"]
    return "\n".join(lines)
