"""`predict infer --disaggregated` and `advise infer --disaggregated`: prefill and decode on separate pools, the KV
cache between them. Parsing and printing only; the model is `linkscope.model.step.disagg`, the search
`linkscope.advise.disagg`. Both are imported where a command uses them, so a plain `predict infer` (which only
checks that no disaggregated option was given alone) starts without them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from linkscope.cli.common import console, print_json
from linkscope.cli.options import check_option, choice
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import MAX_GPUS, check_number
from linkscope.model.step.compute import ENGINES, PRECISIONS

if TYPE_CHECKING:
    from linkscope.advise.infer import InferRequest
    from linkscope.hardware.loader import HardwareDB
    from linkscope.hardware.offering import Offering
    from linkscope.model.step.kv_transfer import KvOptions
    from linkscope.model.step.transformer import ModelConfig


@dataclass(frozen=True)
class PoolArgs:
    """One pool as given: GPUs or instances, and its parallelism."""

    name: str
    gpus: int | None
    instances: int | None
    tp: int
    ep: int = 1


def check_disaggregated_only(disaggregated: bool, given: dict[str, bool]) -> None:
    """A `--disaggregated` option given without `--disaggregated` is a mistake, not something to ignore."""
    if disaggregated:
        return
    flags = [flag for flag, set_ in given.items() if set_]
    if flags:
        raise UserError(f"{flags[0]} needs --disaggregated")


def pool_gpus(args: PoolArgs) -> int:
    """The pool's GPUs from `--NAME-gpus` or `--NAME-instances` (exactly one, consistent with the other)."""
    flag = f"--{args.name}"
    check_number(args.gpus, f"{flag}-gpus", 1, MAX_GPUS)
    check_number(args.instances, f"{flag}-instances", 1, MAX_GPUS)
    check_number(args.tp, f"{flag}-tp", 1, MAX_GPUS)
    check_number(args.ep, f"{flag}-ep", 1, MAX_GPUS)
    group = max(args.tp, args.ep)
    if args.gpus is None and args.instances is None:
        raise UserError(f"--disaggregated needs {flag}-gpus or {flag}-instances")
    if args.gpus is not None and args.instances is not None and args.gpus != args.instances * group:
        raise UserError(f"{flag}-gpus {args.gpus} and {flag}-instances {args.instances} disagree: "
                        f"{args.instances} instance(s) of {group} GPUs are {args.instances * group} GPUs")
    return args.gpus if args.gpus is not None else (args.instances or 1) * group


def kv_options(transport: str, block_tokens: int | None, granularity: str, overlap: bool) -> KvOptions:
    """The KV transfer options as given (checked against the context by the model)."""
    from linkscope.model.step.kv_transfer import GRANULARITIES, KV_TRANSPORTS, MAX_BLOCK_TOKENS, KvOptions

    check_number(block_tokens, "--block-tokens", 0, MAX_BLOCK_TOKENS)
    return KvOptions(transport=choice(transport, "--kv-transport", KV_TRANSPORTS), block_tokens=block_tokens,
                     granularity=choice(granularity, "--kv-granularity", GRANULARITIES), overlap=overlap)


@dataclass(frozen=True)
class DisaggArgs:
    """What `predict infer --disaggregated` was given, past the flags every `predict infer` has."""

    system: str
    nodes: int | None
    prefill: PoolArgs
    decode: PoolArgs
    kv: KvOptions
    kv_precision: str
    qps: float | None


def predict_disaggregated(args: DisaggArgs, spec: ModelConfig, input_tokens: int, output_tokens: int,
                          precision: str, engine: str, batch: int | None, budget: float | None, as_json: bool,
                          extra: list[Path]) -> None:
    """Price the plan, print it (or its JSON)."""
    from linkscope.hardware.loader import load_db
    from linkscope.model.calibration.systems import resolve
    from linkscope.model.step.disagg import DisaggJob, Pool, predict_disagg, summary

    check_option(args.nodes, "--nodes")
    check_option(args.qps, "--qps")
    resolved = resolve(args.system, load_db(extra), None, args.nodes)
    job = DisaggJob(model=spec, input_tokens=input_tokens, output_tokens=output_tokens,
                    prefill=Pool(pool_gpus(args.prefill), args.prefill.tp),
                    decode=Pool(pool_gpus(args.decode), args.decode.tp, args.decode.ep),
                    precision=choice(precision, "--precision", PRECISIONS),
                    kv_precision=choice(args.kv_precision, "--kv-precision", PRECISIONS),
                    engine=choice(engine, "--engine", ENGINES), kv=args.kv)
    answer = predict_disagg(job, resolved.system, resolved.tiers, batch, budget, args.qps)
    data = summary(answer, resolved.system)
    if as_json:
        print_json({**data, "latency_budget": budget})
        return
    from linkscope.report.disagg import disagg_lines, disagg_table

    console.print(disagg_table(data, budget))
    for line in disagg_lines(data):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


@dataclass(frozen=True)
class AdviseKvArgs:
    """What `advise infer --disaggregated` adds to `advise infer`."""

    ttft_budget_s: float | None
    kv: KvOptions
    kv_precision: str


def advise_disaggregated(base: InferRequest, offerings: list[Offering], db: HardwareDB, args: AdviseKvArgs,
                         compare: bool, price_per_gpu_hour: float | None, top: int, as_json: bool) -> None:
    """Search every offering, print the frontier, each offering's verdict and (with `compare`) the KV links."""
    from linkscope.advise.disagg import DisaggRequest, advise_disagg
    from linkscope.advise.disagg_links import compare_kv_links
    from linkscope.report.money import current_currency

    check_number(args.ttft_budget_s, "--ttft-budget", 0, 1e6, low_open=True)
    request = DisaggRequest(base, args.ttft_budget_s, args.kv, choice(args.kv_precision, "--kv-precision",
                                                                       PRECISIONS))
    advice = advise_disagg(request, offerings)
    first = advice.frontier[0] if advice.frontier else None
    comparison = None
    if compare and first is not None:
        comparison = compare_kv_links(request, db.offerings[first.offering], db, price_per_gpu_hour)
    if as_json:
        print_json({"frontier": [p.as_dict() for p in advice.frontier],
                    "offerings": [a.as_dict() for a in advice.answers if a.winner or a.reason],
                    "no_plan": advice.no_plan, "interconnect": comparison.as_dict() if comparison else None,
                    "currency": current_currency().as_dict()})
        return
    from linkscope.report.disagg import advise_lines, frontier_table, links_table

    if advice.no_plan:
        console.print(advice.no_plan, highlight=False, markup=False, soft_wrap=True)
        return
    console.print(frontier_table(advice, top))
    for line in advise_lines(advice):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if comparison is not None:
        console.print(links_table(comparison))
        for note in comparison.notes:
            console.print(f"note: {note}", highlight=False, markup=False, style="dim")
