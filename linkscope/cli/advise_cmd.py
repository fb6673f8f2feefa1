"""`linkscope advise train|infer`: what to rent for a job, and how to lay it out. Parsing and printing only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from linkscope.advise.bookable import GpuRequest
from linkscope.advise.infer import InferAdvice, InferRequest, plan_infer
from dataclasses import replace

from linkscope.advise.inputs import DEFAULT_GPU_RANGE, parse_count, parse_deadline, parse_gpu_range, parse_money_usd
from linkscope.advise.interconnect import InterconnectComparison, compare_infer, compare_train
from linkscope.advise.objective import COST_TIE, DEFAULT_DEADLINE_S, Objective, parse_objective
from linkscope.advise.output import (FRONTIER, LIST, InferSelection, TrainSelection, infer_json, select_infer,
                                     select_train, train_json)
from linkscope.advise.train import TrainAdvice, TrainRequest, advise_train, winner_knob_effect
from linkscope.cli.common import console, print_json, user_errors
from linkscope.cli.knob_output import print_knob_effect
from linkscope.cli.options import (MOE_DISPATCHERS, BasePrecisionOpt, BucketMbOpt, GradCompressionOpt, ZeroppOpt,
                                   job_knobs, BlockTokensOpt, CatalogOpt, EngineOpt, EpOpt, EtpOpt, FabricOpt,
                                   KvGranularityOpt, KvOverlapOpt, KvPrecisionOpt, KvTransportOpt,
                                   FrameworkOpt, GlobalBatchOpt, GpuOpt, IbOpt, InputTokensOpt, LoraRankOpt,
                                   LoraTargetsOpt, MaxPriceOpt, MinGpusOpt, MinScaleOutOpt, ModelOpt, MoeDispatcherOpt,
                                   MultiNodeOpt, NvlinkOpt, NvswitchOpt, OutputTokensOpt, PeftOpt, PrecisionOpt,
                                   ProviderOpt, RdmaOpt, SeqLenOpt, TransportOpt, auto_int, check_framework,
                                   check_option, choice, peft_of, transport_choice)
from linkscope.cli.catalog_cmd import warn_stale
from linkscope.cli.disagg_cmd import check_disaggregated_only, kv_options
from linkscope.hardware.catalog import OfferingFilter, filter_offerings
from linkscope.hardware.currency import priced_in_usd
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import MAX_GPUS, check_number
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.hardware.offering import Offering
from linkscope.model.step.compute import ENGINES
from linkscope.model.step.job import batch_and_length
from linkscope.model.step.peft import Peft
from linkscope.model.step.transformer import ModelConfig, load_model
from linkscope.report.interconnect import infer_comparison_table, price_lines, train_comparison_table
from linkscope.report.money import current_currency, shown_currency, showing, to_usd
from linkscope.report.advise import (duration_text, evidence_lines, infer_spread_note, infer_table, money_text,
                                     no_plan_text, profile_lines, reasons_table, spread_note, train_header,
                                     train_table, winner_text)

advise_app = typer.Typer(help="Rank cloud offerings for a training or serving job, each with its best layout.",
                         no_args_is_help=True)

TopOpt = typer.Option(10, "--top", help="Show the best K offerings.")
AllOpt = typer.Option(False, "--all", help="Also list every offering that cannot run the job, with the reason.")
JsonOpt = typer.Option(False, "--json", help="JSON instead of tables.")
PricePerGpuHourOpt = typer.Option(None, "--price-per-gpu-hour",
                                  help="With --compare-interconnect: cost every variant at this price per GPU-hour, "
                                       "in the --currency (default: the price of the closest real offering to each).")
CurrencyOpt = typer.Option("USD", "--currency",
                           help="Show costs in USD, CNY or EUR (converted at the dated ECB reference rate in "
                                "linkscope's data); --budget and the price options are read in it too.")


def _in_usd(amount: float | None) -> float | None:
    """A price option written in the shown currency, in USD (plans are costed in USD)."""
    return None if amount is None else to_usd(amount)


def _with_currency(doc: dict[str, Any]) -> dict[str, Any]:
    """The --json document with the chosen currency: its amounts stay USD (fields named `_usd`), with the factor
    and the rate's date to convert them."""
    doc["currency"] = current_currency().as_dict()
    return doc


def _print_currency_note() -> None:
    note = current_currency().note()
    if note:
        console.print(f"[dim]{note}[/]", highlight=False)


def _offerings(db: HardwareDB, f: OfferingFilter) -> list[Offering]:
    return filter_offerings(db.offerings.values(), f, db)


def _gpu_request(gpus: int | None, gpus_range: str | None) -> GpuRequest:
    if gpus is not None and gpus_range is not None:
        raise UserError("--gpus and --gpus-range: give one or the other")
    if gpus is not None:
        if gpus < 1:
            raise UserError(f"--gpus must be at least 1 (got {gpus})")
        check_number(gpus, "--gpus", 1, MAX_GPUS)
        return GpuRequest(gpus=gpus)
    low, high = parse_gpu_range(gpus_range) if gpus_range else DEFAULT_GPU_RANGE
    return GpuRequest(None, low, high)


def _train_request(config: ModelConfig, tokens: str, gpus: int | None, gpus_range: str | None,
                   seq_len: int | None, global_batch: int | None, deadline: str | None, budget: str | None,
                   objective: str | None, precision: str, peft: Peft | None = None, framework: str = "auto",
                   ep: int | None = None, etp: int | None = 1, moe_dispatcher: str = "alltoall",
                   moe_transport: str = "auto") -> TrainRequest:
    """The job, its layout constraints and its limits as one request."""
    batch, length = batch_and_length(config.seq_len, global_batch, seq_len)
    # The budget is written in the shown currency; plans are costed in USD.
    limits = replace(parse_deadline(deadline), budget_usd=to_usd(parse_money_usd(budget)) if budget else None)
    return TrainRequest(
        model=config, tokens=parse_count(tokens, "--tokens"), global_batch=batch, seq_len=length,
        gpus=_gpu_request(gpus, gpus_range),
        objective=parse_objective(objective) if objective is not None else Objective.COST,
        limits=limits, precision=precision, global_batch_is_default=global_batch is None, peft=peft,
        framework=check_framework(framework), ep=ep, etp=etp, moe_dispatcher=moe_dispatcher,
        moe_transport=moe_transport)


def _print_train(advice: TrainAdvice, selection: TrainSelection) -> None:
    frontier = selection.view == FRONTIER
    console.print(train_header(advice, frontier), highlight=False)
    if selection.top and frontier:
        _print_frontier(advice, selection)
    elif selection.top:
        title = f"{len(advice.feasible)} of {len(advice.rows)} offerings can run it; best {len(selection.top)}"
        console.print(train_table(selection.top, title, console.width))
        console.print(winner_text(selection.top[0]), highlight=False)
    elif not advice.rows:
        console.print("No offering matches these filters.")
    else:
        why = no_plan_text(advice)
        console.print(f"[bold]{escape(why[0].upper() + why[1:])}.[/] The closest, and why not:" if why else
                      "[bold]No offering can run this job as asked[/] (GPU count, memory, deadline, budget). "
                      "The closest:", highlight=False)
        console.print(reasons_table(selection.closest, "closest options"))
    _print_train_footer(advice, selection)


def _print_frontier(advice: TrainAdvice, selection: TrainSelection) -> None:
    shown = len(selection.top)
    title = _frontier_title(len(advice.frontier), shown, "times as fast, extra cost")
    console.print(train_table(selection.top, title, console.width, versus=selection.top[0]))
    note = spread_note(selection.top, console.width)
    if note:
        console.print(f"[dim]{note}[/]", highlight=False)
    console.print(winner_text(selection.top[0], "Cheapest"), highlight=False)
    fastest = selection.top[-1]
    if fastest is not selection.top[0]:
        console.print(f"[bold]Fastest: {fastest.offering}[/] ({fastest.gpus} x {fastest.gpu}): "
                      f"{duration_text(fastest.time_to_train_s)}, {money_text(fastest.cost_usd)}", highlight=False)
    if selection.others:
        title = (f"the other offerings, each at its cheapest plan within the limits, or a faster one costing at most "
                 f"{COST_TIE:.0%} more (vs #1 above)")
        console.print(train_table(selection.others, title, console.width, versus=selection.top[0], start=shown + 1))
    hidden = len({r.offering for r in advice.feasible} - {r.offering for r in selection.top + selection.others})
    if hidden > 0:
        console.print(f"[dim]{hidden} more offerings can run it within the limits (--objective cost or time lists "
                      "them all).[/]", highlight=False)


def _print_infer_spread(rows: list[Any], with_qps: bool) -> None:
    """The p10..p90 line under a narrow serving table (InferOption rows)."""
    note = infer_spread_note(rows, console.width, with_qps)
    if note:
        console.print(note, highlight=False, soft_wrap=True, markup=False)


def _frontier_title(plans: int, shown: int, versus: str) -> str:
    """`12 plans on the frontier, 10 shown, cheapest first; vs #1: ...` (--top shows more)."""
    part = f", {shown} shown" if shown < plans else ""
    return f"{plans} plans on the frontier{part}, cheapest first; vs #1: {versus}"


def _print_train_footer(advice: TrainAdvice, selection: TrainSelection) -> None:
    top = selection.top
    for line in evidence_lines(selection.top + selection.others):
        console.print(line, highlight=False, markup=False)
    for line in profile_lines(advice.rows):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if selection.infeasible:
        console.print(reasons_table(selection.infeasible, "cannot run this job"))
    elif selection.hidden_infeasible and top:
        console.print(f"[dim]{selection.hidden_infeasible} more cannot run it; --all lists them with the reason.[/]")
    console.print(f"[dim]searched {advice.layouts_enumerated:,} layouts ({advice.layouts_priced:,} that fit memory "
                  f"priced by the step model) over {len(advice.rows)} offerings[/]", highlight=False)


@advise_app.command("train")
@user_errors
def train(
    model: str = ModelOpt,
    tokens: str = typer.Option(..., "--tokens", help="Tokens to train on: 2e12, 300B, 2B (K/M/B/T suffixes)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Exactly this many GPUs (whole nodes)."),
    gpus_range: Optional[str] = typer.Option(None, "--gpus-range",
                                             help="Try power-of-two node counts in LOW..HIGH GPUs (default 8..1024)."),
    seq_len: Optional[int] = SeqLenOpt,
    global_batch: Optional[int] = GlobalBatchOpt,
    deadline: Optional[str] = typer.Option(
        None, "--deadline", help=f"Finish within this time: 30d, 36h, 2w, 1y (default {DEFAULT_DEADLINE_S / 86400:g}d; "
                                 "none: no deadline)."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Spend at most this much (in the --currency): "
                                                                "50000, 50k, 1.2M."),
    objective: Optional[str] = typer.Option(
        None, "--objective", help="cost or time: rank a flat list of offerings by total cost or total time instead "
                                  "of showing the time-cost frontier."),
    precision: str = PrecisionOpt,
    ep: Optional[str] = EpOpt,
    etp: str = EtpOpt,
    moe_dispatcher: str = MoeDispatcherOpt,
    transport: str = TransportOpt,
    peft: Optional[str] = PeftOpt,
    lora_rank: int = LoraRankOpt,
    lora_targets: str = LoraTargetsOpt,
    base_precision: str = BasePrecisionOpt,
    framework: str = FrameworkOpt,
    grad_compression: str = GradCompressionOpt,
    bucket_mb: Optional[float] = BucketMbOpt,
    zeropp: Optional[str] = ZeroppOpt,
    compare: bool = typer.Option(False, "--compare-interconnect",
                                 help="Also run the first plan's job (same GPUs) on PCIe / NVLink mesh / NVSwitch "
                                      "(/ NVL72-class) x IB / RoCE / EFA / TCP, each at its price."),
    price_per_gpu_hour: Optional[float] = PricePerGpuHourOpt,
    gpu: Optional[str] = GpuOpt, min_gpus: Optional[int] = MinGpusOpt, nvlink: bool = NvlinkOpt,
    nvswitch: bool = NvswitchOpt, ib: bool = IbOpt, rdma: bool = RdmaOpt, fabric: Optional[str] = FabricOpt,
    min_scale_out_gbit: Optional[float] = MinScaleOutOpt, provider: Optional[str] = ProviderOpt,
    max_price_per_gpu_hour: Optional[float] = MaxPriceOpt, multi_node: bool = MultiNodeOpt,
    top: int = TopOpt, show_all: bool = AllOpt, as_json: bool = JsonOpt, extra: Optional[list[Path]] = CatalogOpt,
    currency: str = CurrencyOpt,
) -> None:
    """The time-cost frontier of a training job over the catalog (each plan an offering, node count and layout),
    or offerings ranked by total cost or time."""
    if top < 1:
        raise UserError(f"--top must be at least 1 (got {top})")
    check_option(gpus, "--gpus")
    check_option(seq_len, "--seq-len")
    check_option(global_batch, "--global-batch")
    check_option(price_per_gpu_hour, "--price-per-gpu-hour")
    with showing(shown_currency(currency)):
        db = priced_in_usd(load_db(extra or []))  # advise compares prices; they must share a currency
        config = load_model(model)
        request = _train_request(config, tokens, gpus, gpus_range, seq_len, global_batch, deadline, budget,
                                 objective, precision, peft_of(peft, lora_rank, lora_targets, base_precision, config),
                                 framework, ep=auto_int(ep, "--ep"), etp=auto_int(etp, "--etp"),
                                 moe_dispatcher=choice(moe_dispatcher, "--moe-dispatcher", MOE_DISPATCHERS),
                                 moe_transport=transport_choice(transport))
        request = replace(request, knobs=job_knobs(grad_compression, bucket_mb, zeropp))
        wanted = _wanted(gpu, min_gpus, (nvlink, nvswitch, ib, rdma, multi_node), fabric, min_scale_out_gbit,
                         provider, max_price_per_gpu_hour)
        offerings = _offerings(db, wanted)
        advice = advise_train(request, offerings)
        selection = select_train(advice, top, show_all, LIST if objective is not None else FRONTIER)
        winner = selection.top[0] if selection.top else None
        comparison = None
        if compare and winner is not None:
            comparison = compare_train(request, winner, db.offerings[winner.offering], db,
                                       _in_usd(price_per_gpu_hour), advice)
        warn_stale([db.offerings[r.offering] for r in selection.top])
        effect = winner_knob_effect(request, winner, db.offerings[winner.offering]) if winner is not None else None
        if as_json:
            print_json({**_with_currency(train_json(advice, selection, comparison)), "knobs": effect})
            return
        _print_train(advice, selection)
        print_knob_effect(effect)
        if compare:
            _print_comparison(comparison)
        _print_currency_note()


def _print_comparison(comparison: InterconnectComparison | None, budget: float = 0.0) -> None:
    if comparison is None:
        console.print("No plan to compare interconnects for.")
        return
    table = train_comparison_table(comparison, console.width) if comparison.kind == "train" else \
        infer_comparison_table(comparison, budget, console.width)
    console.print(table)
    console.print("price per GPU-hour from: " + "; ".join(price_lines(comparison)), highlight=False, markup=False)
    for note in comparison.notes:
        console.print(f"note: {note}", highlight=False, markup=False, style="dim")


@advise_app.command("infer")
@user_errors
def infer(
    model: str = ModelOpt,
    latency_budget: float = typer.Option(..., "--latency-budget",
                                         help="Tokens per second each user must see (1 / time per output token)."),
    input_tokens: int = InputTokensOpt,
    output_tokens: int = OutputTokensOpt,
    qps: Optional[float] = typer.Option(None, "--qps", help="Requests per second to serve: sizes the fleet."),
    objective: Optional[str] = typer.Option(
        None, "--objective", help="cost or time: rank a flat list of offerings by $/Mtok or by per-user speed "
                                  "instead of showing the time-cost frontier."),
    tp: Optional[int] = typer.Option(None, "--tp", help="Serve at this tensor-parallel size only (default: every "
                                                        "size inside a node is tried)."),
    compare: bool = typer.Option(False, "--compare-interconnect",
                                 help="Also serve on one node of the first plan's GPU with PCIe / NVLink mesh / "
                                      "NVSwitch (/ NVL72-class), each at its price."),
    price_per_gpu_hour: Optional[float] = PricePerGpuHourOpt,
    precision: str = PrecisionOpt,
    engine: str = EngineOpt,
    transport: str = TransportOpt,
    gpu: Optional[str] = GpuOpt, min_gpus: Optional[int] = MinGpusOpt, nvlink: bool = NvlinkOpt,
    nvswitch: bool = NvswitchOpt, ib: bool = IbOpt, rdma: bool = RdmaOpt, fabric: Optional[str] = FabricOpt,
    min_scale_out_gbit: Optional[float] = MinScaleOutOpt, provider: Optional[str] = ProviderOpt,
    max_price_per_gpu_hour: Optional[float] = MaxPriceOpt, multi_node: bool = MultiNodeOpt,
    top: int = TopOpt, show_all: bool = AllOpt, as_json: bool = JsonOpt, extra: Optional[list[Path]] = CatalogOpt,
    currency: str = CurrencyOpt,
    disaggregated: bool = typer.Option(False, "--disaggregated",
                                       help="Search prefill and decode pools (TPs, prefill:decode ratio, nodes) "
                                            "beside colocated serving, and say which wins; with "
                                            "--compare-interconnect, the KV link too."),
    ttft_budget: Optional[float] = typer.Option(None, "--ttft-budget", help="--disaggregated: time to first "
                                                                            "token every plan must meet, seconds."),
    kv_transport: str = KvTransportOpt, kv_precision: str = KvPrecisionOpt,
    block_tokens: Optional[int] = BlockTokensOpt, kv_granularity: str = KvGranularityOpt,
    kv_overlap: bool = KvOverlapOpt,
) -> None:
    """The time-cost frontier of serving a model at a per-user speed (each plan an offering, layout and batch),
    or offerings ranked by dollars per million output tokens or by per-user speed."""
    if top < 1:
        raise UserError(f"--top must be at least 1 (got {top})")
    check_option(latency_budget, "--latency-budget")
    check_option(input_tokens, "--input-tokens")
    check_option(output_tokens, "--output-tokens")
    check_option(qps, "--qps")
    check_option(tp, "--tp")
    check_option(price_per_gpu_hour, "--price-per-gpu-hour")
    with showing(shown_currency(currency)):
        db = priced_in_usd(load_db(extra or []))  # advise compares prices; they must share a currency
        request = InferRequest(load_model(model), latency_budget, input_tokens, output_tokens, qps, precision,
                               parse_objective(objective) if objective is not None else Objective.COST, tp,
                               choice(engine, "--engine", ENGINES), moe_transport=transport_choice(transport))
        wanted = _wanted(gpu, min_gpus, (nvlink, nvswitch, ib, rdma, multi_node), fabric, min_scale_out_gbit,
                         provider, max_price_per_gpu_hour)
        check_disaggregated_only(disaggregated, {
            "--ttft-budget": ttft_budget is not None, "--kv-transport": kv_transport != "auto",
            "--kv-precision": kv_precision != "bf16", "--block-tokens": block_tokens is not None,
            "--kv-granularity": kv_granularity != "request", "--kv-overlap": kv_overlap})
        if disaggregated:
            from linkscope.cli.disagg_cmd import AdviseKvArgs, advise_disaggregated

            advise_disaggregated(request, _offerings(db, wanted), db, AdviseKvArgs(
                ttft_budget, kv_options(kv_transport, block_tokens, kv_granularity, kv_overlap), kv_precision),
                compare, _in_usd(price_per_gpu_hour), top, as_json)
        else:
            _advise_serving(request, db, _offerings(db, wanted), (top, show_all, objective is not None),
                            (compare, _in_usd(price_per_gpu_hour)), as_json)
        if not as_json:
            _print_currency_note()


def _advise_serving(request: InferRequest, db: HardwareDB, offerings: list[Offering],
                    shown: tuple[int, bool, bool], compare: tuple[bool, float | None], as_json: bool) -> None:
    """Colocated serving plans: searched, selected (`shown`: top, --all, a ranked list instead of the frontier),
    compared across interconnects (`compare`: whether, and the USD per GPU-hour to compare at, None: each
    offering's own), printed."""
    top, show_all, listed = shown
    compared, price_per_gpu_hour = compare
    advice = plan_infer(request, offerings)
    selection = select_infer(advice, top, show_all, LIST if listed else FRONTIER)
    warn_stale([db.offerings[r.offering] for r in selection.top + selection.others])
    first = selection.top[0] if selection.top else None
    comparison = None
    if compared and first is not None:
        comparison = compare_infer(request, db.offerings[first.offering], db, price_per_gpu_hour)
    if as_json:
        print_json(_with_currency(infer_json(advice, selection, comparison)))
        return
    _print_infer(advice, selection)
    if compared:
        _print_comparison(comparison, request.tokens_per_s_per_user)


def _wanted(gpu: str | None, min_gpus: int | None, switches: tuple[bool, bool, bool, bool, bool],
            fabric: str | None, min_scale_out_gbit: float | None, provider: str | None,
            max_price_per_gpu_hour: float | None) -> OfferingFilter:
    """The offering filter the options give (`switches`: --nvlink, --nvswitch, --ib, --rdma, --multi-node)."""
    check_number(min_gpus, "--min-gpus", 1, MAX_GPUS)
    nvlink, nvswitch, ib, rdma, multi_node = switches
    return OfferingFilter(gpu=gpu, min_gpus=min_gpus, nvlink=nvlink, nvswitch=nvswitch, ib=ib, rdma=rdma,
                          fabric=fabric, min_scale_out_gbit=min_scale_out_gbit, provider=provider,
                          max_price_per_gpu_hour=_in_usd(max_price_per_gpu_hour), multi_node=multi_node)


def _print_infer(advice: InferAdvice, selection: InferSelection) -> None:
    request, rows = advice.request, advice.rows
    feasible = [r for r in rows if r.feasible]
    frontier = selection.view == FRONTIER
    console.print(f"[bold]{request.model.id}[/] at {request.tokens_per_s_per_user:g} tokens/s per user or more, "
                  f"{request.input_tokens} in / {request.output_tokens} out, {request.precision}, "
                  f"{request.engine} engine"
                  + (f", {request.qps:g} requests/s" if request.qps else "")
                  + (": the time-cost frontier" if frontier else f": ranked by {_infer_ranking(request.objective)}"),
                  highlight=False)
    with_qps = request.qps is not None
    if selection.top and frontier:
        versus = f"times the speed per user, extra {current_currency().unit('/Mtok')}"
        title = _frontier_title(len(advice.frontier), len(selection.top), versus)
        console.print(infer_table(selection.top, title, with_qps, versus=selection.top[0], width=console.width))
        if selection.others:
            console.print(infer_table(selection.others, "the other offerings, each at its cheapest plan at the "
                                      "budget (vs #1 above)", with_qps, versus=selection.top[0],
                                      start=len(selection.top) + 1, width=console.width))
        _print_infer_spread([*selection.top, *selection.others], with_qps)
    elif selection.top:
        title = (f"{len(feasible)} of {len(rows)} offerings meet the budget; best {len(selection.top)} by "
                 f"{_infer_ranking(request.objective)}")
        console.print(infer_table(selection.top, title, with_qps, width=console.width))
        if with_qps:
            _print_infer_spread(selection.top, with_qps)
    else:
        console.print("[bold]No offering meets this budget.[/] The closest, and why not:" if rows
                      else "No offering matches these filters.")
    shown = {r.offering for r in selection.top + selection.others}
    for line in evidence_lines(selection.top + selection.others):
        console.print(line, highlight=False, markup=False)
    hidden = len({r.offering for r in feasible} - shown)
    if hidden:
        console.print(f"[dim]{hidden} more offerings meet the budget (--objective cost or time lists them all).[/]",
                      highlight=False)
    if selection.infeasible:
        console.print(reasons_table(selection.infeasible, "closest options" if not feasible
                                    else "cannot serve it at this budget"))
    elif selection.hidden_infeasible:
        console.print(f"[dim]{selection.hidden_infeasible} more cannot; --all lists them with the reason.[/]")


def _infer_ranking(objective: Objective) -> str:
    return current_currency().unit("/Mtok") if objective == Objective.COST else "tokens/s per user"


def register(app: typer.Typer) -> None:
    """Add `advise train` and `advise infer` to the command line."""
    from linkscope.cli import tune_cmd

    tune_cmd.register(advise_app)
    app.add_typer(advise_app, name="advise")
