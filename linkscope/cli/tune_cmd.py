"""`linkscope advise tune`: parse, call advise/tune.py, print the ranked knobs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from linkscope.cli.common import console, print_json, user_errors
from linkscope.cli.options import (DpOpt, TrainGpusOpt, TrainNodesOpt, FrameworkOpt, GlobalBatchOpt, MicroBatchOpt,
                                   ModelOpt, PrecisionOpt, SeqLenOpt, SystemOpt, ZeroOpt, CatalogOpt, check_framework,
                                   check_option, layout_request, pp_opt, tp_opt, training_job)

if TYPE_CHECKING:
    from linkscope.advise.tune import TuneAdvice


@user_errors
def tune(
    system: str = SystemOpt,
    model: str = ModelOpt,
    gpus: Optional[int] = TrainGpusOpt,
    nodes: Optional[int] = TrainNodesOpt,
    tp: Optional[str] = tp_opt(),
    pp: Optional[str] = pp_opt(),
    dp: Optional[str] = DpOpt,
    micro_batch: Optional[str] = MicroBatchOpt,
    global_batch: Optional[int] = GlobalBatchOpt,
    seq_len: Optional[int] = SeqLenOpt,
    zero: Optional[int] = ZeroOpt,
    precision: str = PrecisionOpt,
    framework: str = FrameworkOpt,
    top: int = typer.Option(8, "--top", help="Show the best K knob settings."),
    as_json: bool = typer.Option(False, "--json"),
    extra: Optional[list[Path]] = CatalogOpt,
) -> None:
    """Rank data-parallel knobs (gradient compression, bucket size, ZeRO++) by predicted step time on a System,
    each with its range and the `linkscope bench train` command that measures it."""
    from linkscope.advise.tune import advise_tune
    from linkscope.hardware.errors import UserError
    from linkscope.hardware.loader import load_db
    from linkscope.model.calibration.systems import resolve
    from linkscope.model.step.transformer import load_model

    if top < 1:
        raise UserError(f"--top must be at least 1 (got {top})")
    check_option(gpus, "--gpus")
    check_option(nodes, "--nodes")
    spec = load_model(model)
    job = training_job(spec, global_batch, seq_len, precision, framework=check_framework(framework))
    req = layout_request(tp, pp, dp, "1", None, micro_batch, "auto", zero)
    resolved = resolve(system, load_db(extra or []), gpus, nodes)
    if resolved.train_fit is not None:
        raise UserError("--system: advise tune needs a System or offering, not a profile's fitted step model")
    advice = advise_tune(job, resolved, req, model, system)
    if as_json:
        print_json(advice.as_dict())
        return
    _print(advice, top)


def _print(advice: TuneAdvice, top: int) -> None:
    from rich.table import Table

    b = advice.baseline
    console.print(f"[bold]{advice.model}[/] on [bold]{advice.system}[/], {advice.gpus} GPUs, global batch "
                  f"{advice.global_batch} x {advice.seq_len} tokens: baseline {b.step_time_s:.4g} s per step "
                  f"({b.step_time_s_range[0]:.4g}..{b.step_time_s_range[-1]:.4g}), data-parallel exposed "
                  f"{b.dp_comm_exposed_s:.3g} s", highlight=False)
    table = Table(title="knobs ranked by predicted step time")
    for column in ("#", "knobs", "step s", "p10..p90 s", "x base", "DP s", "enc s", "GiB", "tp/pp/dp zero"):
        table.add_column(column, overflow="fold")
    for i, o in enumerate(advice.options[:top], 1):
        lay = o.layout
        table.add_row(str(i), o.label, f"{o.step_time_s:.4g}",
                      f"{o.step_time_s_range[0]:.3g}..{o.step_time_s_range[-1]:.3g}", f"{o.speedup:.3f}",
                      f"{o.dp_comm_exposed_s:.2g}", f"{o.knob_compute_s:.2g}",
                      f"{o.memory_gib_per_gpu:.1f}{'' if o.fits else ' (no fit)'}",
                      f"{lay['tp']}/{lay['pp']}/{lay['dp']} z{lay['zero']} {o.framework}")
    console.print(table)
    console.print("measure them:", highlight=False)
    for i, o in enumerate(advice.options[:top], 1):
        how = f"(not measurable by bench train: {o.measure_note})" if o.bench_command is None else \
            o.bench_command + ("  [plain DDP]" if o.measure_note else "")
        console.print(f"  {i}. {how}", highlight=False, markup=False, soft_wrap=True)
    plain = next((o.measure_note for o in advice.options[:top] if o.bench_command and o.measure_note), "")
    if plain:
        console.print(f"  [plain DDP]: {plain}", highlight=False, markup=False, soft_wrap=True)
    for s in advice.skipped:
        console.print(f"skipped {s['label']}: {s['reason']}", highlight=False, markup=False, soft_wrap=True)
    for note in [*advice.notes, f"ranges from {advice.range_basis}"]:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `tune` to `advise`."""
    app.command("tune")(tune)
