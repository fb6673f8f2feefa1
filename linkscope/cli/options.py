"""Options several commands share: the catalog filters (`catalog`, `advise`), `--catalog FILE`, and one valid
range per numeric option so that `--seq-len` means the same thing (and fails the same way) in every command."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from linkscope.cli.common import check_range
from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import check_imbalance
from linkscope.model.step.compute import DEFAULT_ENGINE, ENGINES, PRECISIONS
from linkscope.model.step.job import ATTENTION_KERNELS, FRAMEWORKS, Job, batch_and_length
from linkscope.model.step.knobs import Knobs, knobs_from_options
from linkscope.model.step.peft import DEFAULT_RANK, DEFAULT_TARGETS, Peft, check_peft
from linkscope.model.step.transformer import ModelConfig

if TYPE_CHECKING:
    from linkscope.model.step.search import LayoutRequest

_COUNT = 10_000_000  # GPUs, nodes, parallel sizes: far beyond any machine
_LENGTH = 100_000_000  # sequences, tokens: far beyond any real job, keeps the layout search bounded
_RATE = 1e12  # tokens/s, requests/s
_PRICE = 1e6  # USD per GPU-hour: far beyond any GPU's

# flag -> (lowest, highest) accepted value. 0 is a value, never "not given": it must lie in range.
OPTION_RANGES: dict[str, tuple[float, float]] = {
    "--gpus": (1, _COUNT), "--nodes": (1, _COUNT), "--tp": (1, _COUNT), "--pp": (1, _COUNT), "--dp": (1, _COUNT),
    "--cp": (1, _COUNT), "--ep": (1, _COUNT), "--etp": (1, _COUNT), "--interleave": (1, _COUNT),
    "--batch": (1, _LENGTH), "--global-batch": (1, _LENGTH),
    "--micro-batch": (1, _LENGTH),
    "--seq-len": (1, _LENGTH), "--input-tokens": (1, _LENGTH), "--output-tokens": (1, _LENGTH),
    "--latency-budget": (1e-9, _RATE), "--qps": (1e-9, _RATE), "--price-per-gpu-hour": (1e-9, _PRICE),
}


def check_option(value: float | None, flag: str) -> None:
    """UserError unless `value` is None (not given) or inside `flag`'s one range."""
    low, high = OPTION_RANGES[flag]
    check_range(value, flag, low, high)


def auto_int(value: str | None, flag: str) -> int | None:
    """`auto` (or nothing) -> None (searched), else an integer inside `flag`'s range."""
    if value is None or value == "auto":
        return None
    try:
        number = int(value)
    except ValueError:
        raise UserError(f"{flag}: expected a positive integer or 'auto', got '{value}'") from None
    check_option(number, flag)
    return number


def choice(value: str, flag: str, choices: tuple[str, ...]) -> str:
    """`value` if it is one of `choices`, else one line naming the flag and the choices."""
    if value not in choices:
        # Escaped when not printable: a control character would break the one-line message.
        shown = value if value.isprintable() else value.encode("unicode_escape").decode("ascii")
        raise UserError(f"{flag}: '{shown}' is not one of {', '.join(choices)}")
    return value


def check_framework(framework: str) -> str:
    """--framework: one of FRAMEWORKS."""
    return choice(framework, "--framework", FRAMEWORKS)


def check_zero(zero: int | None) -> None:
    """ZeRO stages 0-3 everywhere; None means searched."""
    if zero is not None and zero not in (0, 1, 2, 3):
        raise UserError(f"--zero: must be 0, 1, 2 or 3 (got {zero})")


def check_formats(as_json: bool, as_csv: bool, required: bool = False) -> None:
    """--json and --csv exclude each other wherever both exist; `required`: one of them must be given."""
    if (as_json and as_csv) or (required and not (as_json or as_csv)):
        raise UserError("choose one format: --json or --csv")


# One definition per option that several commands take, so that the name, short form, default and help
# read the same everywhere (README: "Option vocabulary").
SystemOpt = typer.Option(..., "--system", "-s", help="Preset, offering (provider/instance), YAML file or "
                                                     "profile:NAME.")
ModelOpt = typer.Option(..., "--model", "-m", help="Model preset (llama2-70b, gpt3-175b, ...) or a YAML/JSON file.")
GlobalBatchOpt = typer.Option(None, "--global-batch", help="Sequences per step of the whole job (default: ~4M "
                                                           "tokens, a power of two).")
SeqLenOpt = typer.Option(None, "--seq-len", help="Tokens per sequence (default: the model's).")
TrainGpusOpt = typer.Option(None, "--gpus", help="GPUs in all (whole nodes beyond one node).")
TrainNodesOpt = typer.Option(None, "--nodes", help="Nodes of the System.")
DpOpt = typer.Option(None, "--dp", help="Data parallel size or auto.")
MicroBatchOpt = typer.Option(None, "--micro-batch", help="Sequences per micro-batch, or auto (default: searched).")
ZeroOpt = typer.Option(None, "--zero", help="ZeRO stage 0-3 (default: searched).")
EpOpt = typer.Option(None, "--ep", help="Expert-parallel size of an MoE model's expert layers, folded into the "
                                        "tp x cp x dp ranks (Megatron-Core MoE parallel folding), or auto "
                                        "(default: searched).")
EtpOpt = typer.Option("1", "--etp", help="Expert tensor-parallel size (each expert split over etp ranks), or auto.")
MoeDispatcherOpt = typer.Option("alltoall", "--moe-dispatcher",
                                help="How MoE layers move tokens: alltoall (NCCL all-to-allv) or deepep (DeepEP's "
                                     "hierarchical kernels, FP8 dispatch under --precision fp8).")
MOE_DISPATCHERS = ("alltoall", "deepep")
FrameworkOpt = typer.Option("auto", "--framework", help="megatron, fsdp or deepspeed: how data-parallel "
                                                        "communication is scheduled (default auto: megatron for "
                                                        "ZeRO 0-1, deepspeed for 2, fsdp for 3).")
PrecisionOpt = typer.Option("bf16", "--precision", help=f"{', '.join(PRECISIONS)} (weights and GEMMs).")
InputTokensOpt = typer.Option(2048, "--input-tokens", help="Prompt tokens per sequence.")
OutputTokensOpt = typer.Option(512, "--output-tokens", help="Generated tokens per sequence.")
LatencyBudgetOpt = typer.Option(None, "--latency-budget", help="Tokens/s each user must see (1 / time per "
                                                               "output token): the largest batch that meets it.")
EngineOpt = typer.Option(DEFAULT_ENGINE, "--engine", help=f"{' or '.join(ENGINES)}: whether the serving engine "
                                                         "prepares the next step while the GPU runs this one "
                                                         "(TensorRT-LLM, SGLang, vLLM V1; the default) or handles "
                                                         "each sequence on the host between steps (vLLM V0).")
PrefillInterferenceOpt = typer.Option(True, "--prefill-interference/--no-prefill-interference",
                                      help="Count other users' chunked prefills in each user's time per output "
                                           "token (continuous batching, the default); --no-prefill-interference "
                                           "gives decode-only speed.")


# The training job's options: `predict train`, `predict scaling` and `plan` take the same ones.
InterleaveOpt = typer.Option(None, "--interleave", help="Pipeline chunks per stage, or auto.")
RecomputeOpt = typer.Option("auto", "--recompute", help="auto, full, selective or none.")
RECOMPUTE_CHOICES = ("full", "selective", "none")
SequenceParallelOpt = typer.Option(None, "--sequence-parallel/--no-sequence-parallel",
                                   help="Megatron sequence parallelism (default: on with TP).")
MoeA2aOverlapOpt = typer.Option(False, "--moe-a2a-overlap/--no-moe-a2a-overlap",
                                help="Hide MoE dispatch/combine behind another micro-batch's compute (Megatron-Core "
                                     "1F1B A2A overlap).")
MoeImbalanceOpt = typer.Option(1.0, "--moe-imbalance",
                               help="MoE routing imbalance: the busiest EP rank's tokens over the mean (1 = forced "
                                    "balance; dropless routing runs above 1).")
TransportOpt = typer.Option("auto", "--transport",
                            help="How expert-parallel kernels reach other GPUs: ibgda (GPU-initiated RDMA), proxy (a "
                                 "host proxy thread over InfiniBand/RoCE), efa (AWS EFA through a host proxy), "
                                 "nvlink (one node), or auto (from the System: EFA -> efa; InfiniBand/RoCE with "
                                 "GPUDirect -> ibgda; one node -> nvlink).")

# Disaggregated serving's KV cache between the prefill and decode pools (`predict infer` and `advise infer`).
KvTransportOpt = typer.Option("auto", "--kv-transport", help="--disaggregated: nvlink, rdma, tcp or auto (from "
                                                             "where the pools sit on the System).")
KvPrecisionOpt = typer.Option("bf16", "--kv-precision", help="--disaggregated: format of the KV cache (bf16, fp16 "
                                                             "or fp8).")
BlockTokensOpt = typer.Option(None, "--block-tokens", help="--disaggregated: tokens per KV page (default 32, "
                                                           "TensorRT-LLM's).")
KvGranularityOpt = typer.Option("request", "--kv-granularity",
                                help="--disaggregated: request (a page holds a block of every layer) or layer (one "
                                     "layer's block, sent as each layer finishes).")
KvOverlapOpt = typer.Option(False, "--kv-overlap/--no-kv-overlap",
                            help="--disaggregated: send the KV cache chunk by chunk (and layer by layer) while the "
                                 "prefill runs.")


def transport_choice(transport: str) -> str:
    """--transport checked against the transports of hardware/data/moe_transports.yaml or auto (one line naming
    them)."""
    # The hardware module, not the MoE model: a dense model's step never loads the model of dispatch and combine.
    from linkscope.hardware.moe_transports import AUTO, TRANSPORTS

    return choice(transport, "--transport", (AUTO, *TRANSPORTS))


AttentionOpt = typer.Option("flash", "--attention",
                            help="flash (fused, tuned for the GPU), flash2 (FlashAttention-2, and PyTorch SDPA's "
                                 "default before 2.9), triton (FlashAttention's Triton kernel) or unfused (scores "
                                 "materialised).")
DpOverlapOpt = typer.Option(None, "--dp-overlap/--no-dp-overlap",
                            help="Overlap the data-parallel gradient reduction with the backward pass (Megatron "
                                 "--overlap-grad-reduce, DeepSpeed overlap_comm; default: the framework's).")
TpOverlapOpt = typer.Option(False, "--tp-comm-overlap/--no-tp-comm-overlap",
                            help="Overlap tensor-parallel collectives with their GEMMs (Megatron/NeMo "
                                 "--tp-comm-overlap).")
GradCompressionOpt = typer.Option("none", "--grad-compression",
                                  help="Data-parallel gradient compression: none, fp16, bf16 (DDP hooks / FSDP "
                                       "reduce_dtype), powersgd:RANK (DDP PowerSGD hook) or onebit (DeepSpeed 1-bit "
                                       "Adam). Changes the optimisation; no convergence model.")
BucketMbOpt = typer.Option(None, "--bucket-mb", help="DDP gradient bucket size in MB (bucket_cap_mb): one "
                                                     "collective per bucket, the last bucket exposed.")
ZeroppOpt = typer.Option(None, "--zeropp", help="ZeRO++ options for DeepSpeed ZeRO-3, comma-separated: qw "
                                                "(INT8 weight gathers), qg (INT4 gradient reduce-scatter), hp "
                                                "(secondary weight partition inside the node).")


def job_knobs(grad_compression: str = "none", bucket_mb: float | None = None, zeropp: str | None = None) -> Knobs:
    """`--grad-compression`, `--bucket-mb` and `--zeropp` as the job's Knobs (one line naming a bad value)."""
    return knobs_from_options(grad_compression, bucket_mb, zeropp)


def training_job(spec: ModelConfig, global_batch: int | None, seq_len: int | None, precision: str = "bf16",
                 attention: str = "flash", moe_dispatcher: str = "alltoall", moe_imbalance: float = 1.0,
                 **options: Any) -> Job:
    """The training job the options describe, each checked against its one definition (one line naming a bad
    flag): its global batch and sequence length as given, else the model's length and ~4M tokens."""
    check_option(global_batch, "--global-batch")
    check_option(seq_len, "--seq-len")
    batch, length = batch_and_length(spec.seq_len, global_batch, seq_len)
    return Job(model=spec, global_batch=batch, seq_len=length, precision=choice(precision, "--precision", PRECISIONS),
               attention=choice(attention, "--attention", ATTENTION_KERNELS),
               moe_dispatcher=choice(moe_dispatcher, "--moe-dispatcher", MOE_DISPATCHERS),
               moe_imbalance=check_imbalance(moe_imbalance, "--moe-imbalance"), **options)


def layout_request(tp: str | None, pp: str | None, dp: str | None, cp: str | None, interleave: str | None = None,
                   micro_batch: str | None = None, recompute: str = "auto", zero: int | None = None,
                   sequence_parallel: bool | None = None, ep: str | None = None,
                   etp: str | None = "1") -> LayoutRequest:
    """What the layout search may not choose, from the layout options (`auto` or nothing: searched)."""
    # Imported here: the commands that share these options but search no layout start without the step model.
    from linkscope.model.step.search import LayoutRequest

    check_zero(zero)
    return LayoutRequest(tp=auto_int(tp, "--tp"), pp=auto_int(pp, "--pp"), dp=auto_int(dp, "--dp"),
                         cp=auto_int(cp, "--cp"), interleave=auto_int(interleave, "--interleave"),
                         micro_batch=auto_int(micro_batch, "--micro-batch"),
                         recompute=None if recompute == "auto" else choice(recompute, "--recompute", RECOMPUTE_CHOICES),
                         zero=zero, sequence_parallel=sequence_parallel, ep=auto_int(ep, "--ep"),
                         etp=auto_int(etp, "--etp"))


def tp_opt(default: str | None = None) -> Any:  # typer.Option is typed Any so that it can stand as a default
    """--tp: a size or auto, the same in predict, plan and infer."""
    return typer.Option(default, "--tp", help="Tensor parallel size or auto (default: searched).")


def pp_opt(default: str | None = None) -> Any:
    """--pp: a size or auto."""
    return typer.Option(default, "--pp", help="Pipeline parallel size or auto (default: searched).")


# What every command that starts ranks takes (`bench`, `p2p`, `bench train`).
BackendOpt = typer.Option("auto", "--backend", help="auto (nccl with CUDA, else gloo), gloo or nccl.")
NprocOpt = typer.Option(None, "--nproc", help="Local ranks outside torchrun (default 2 on CPU, all GPUs).")
OversubscribeOpt = typer.Option(False, "--oversubscribe",
                                help="Allow more local CPU ranks than cores (up to 4 per core).")
TimeoutOpt = typer.Option(300.0, "--timeout", help="Give up when no rank progresses for S seconds.")
LabelOpt = typer.Option("", "--label", help="A name for the run in the store.")
RunDbOpt = typer.Option(None, "--db", help="Results store: an SQLite file or a postgresql:// URL (default: "
                                          "$LINKSCOPE_DB, else a file in the user data dir).")
DbOpt = RunDbOpt
"""Every command that reads or writes the store takes the same --db."""


# The catalog filters: `linkscope catalog` and `linkscope advise` take the same ones.
GPU_FAMILIES_IN_HELP = ("A100", "H100", "H200", "B200", "B300", "MI300X")
"""Families named in `--gpu`'s help (a test checks each is a family in the data); `catalog --help` is read before
any data file is loaded, so the list is written out here."""
GpuOpt = typer.Option(None, "--gpu", help=f"A family ({', '.join(GPU_FAMILIES_IN_HELP)}, ...) matches every variant "
                                          "of it (A100: SXM4 and PCIe, 40 and 80 GB); an exact id or alias "
                                          "(A100-SXM4-80GB) matches that GPU alone.")
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
PeftOpt = typer.Option(None, "--peft", help="Fine-tune with adapters on a frozen base: lora (default: full "
                                            "training).")
LoraRankOpt = typer.Option(DEFAULT_RANK, "--lora-rank", help="LoRA adapter rank (with --peft lora).")
LoraTargetsOpt = typer.Option(DEFAULT_TARGETS, "--lora-targets", help="Weights with adapters: attn (Q, K, V, output "
                                                             "projection), attn-mlp, or all (also the output layer).")
BasePrecisionOpt = typer.Option("bf16", "--base-precision", help="Frozen base format: bf16, fp8, or nf4 "
                                                                 "(QLoRA-style 4-bit, data parallelism only).")


def peft_of(method: str | None, rank: int, targets: str, base_precision: str, model: ModelConfig) -> Peft | None:
    """`--peft` and its options as one Peft (None without --peft), or one line naming the bad option."""
    if method is None:
        # Adapter options without --peft would be dropped silently: the user meant something that is not priced.
        given = [flag for flag, value, default in (("--lora-rank", rank, DEFAULT_RANK),
                                                   ("--lora-targets", targets, DEFAULT_TARGETS),
                                                   ("--base-precision", base_precision, "bf16")) if value != default]
        if given:
            verb = "apply" if len(given) > 1 else "applies"
            raise UserError(f"{', '.join(given)} {verb} only with --peft lora (full training was asked for)")
        return None
    peft = Peft(rank=rank, targets=targets, base_precision=base_precision, method=method)
    problem = check_peft(peft, model)
    if problem:
        raise UserError(problem)
    return peft
