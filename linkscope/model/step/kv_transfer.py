"""A request's KV cache from the prefill pool to the decode pool: paged transfers over NVLink, PCIe, RDMA or TCP.

Geometry. The cache is paged: a block holds `block_tokens` tokens. With `request` granularity a page is one block
of every layer (TensorRT-LLM's block spans the layers of its stage), so a prompt of I tokens is ceil(I / block)
pages; with `layer` granularity a page is one layer's block (vLLM's per-layer cache tensors), layers times as many
pages, which is what lets a layer leave as soon as its prefill is done. Each prefill rank holds the KV heads of its
TP shard (heads are replicated once TP exceeds them); each decode rank receives its own shard, gathered from every
prefill rank that holds part of it, so one page of the prompt becomes one message per (decode rank, prefill rank
holding part of its heads).

Price. The link is the collective model's send/recv on the System's tiers (model/comm): the first message's
latency and, inside a node, the per-GPU bandwidth of the path (NVLink or PCIe); across nodes each sending GPU has
a NIC of its own while the node has as many as it has senders, and shares them beyond, at the fabric's efficiency
(NCCL's socket traits for TCP). On top of it the transfer engine pays per page and per request
(data/kv.yaml): posting one page is serial with moving it on the posting rank (LogP's overhead), so the busiest rank
takes `pages x per_message + bytes / bandwidth`, plus the request's control round trip and the first message's
latency once.

Overlap. A transfer may leave stage by stage while the prefill runs: per chunk of a chunked prefill, and per layer
with `layer` granularity. With S stages of compute c = prefill / S and transfer x each, the last stage lands at
max(prefill + x, c + S x), so what shows after the prefill is max(x, S x - (S - 1) c).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from linkscope.hardware import built_cache
from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import parse_yaml
from linkscope.hardware.system import System
from linkscope.model.comm.collectives import collective_time
from linkscope.model.comm.tiers import CommTiers, check_multi_node, comm_tiers
from linkscope.model.step.compute import compute_constants
from linkscope.model.step.infer import kv_cache_bytes_per_token
from linkscope.model.step.transformer import ModelConfig

KV_FILE = Path(__file__).parents[1] / "data" / "kv.yaml"
KV_TRANSPORTS = ("auto", "nvlink", "rdma", "tcp")
"""What `--kv-transport` accepts; `auto` takes the path where the pools sit."""
PATHS = ("nvlink", "xgmi", "pcie", "rdma", "tcp")
"""The resolved paths: a scale-up link inside a domain (NVLink, xGMI, or PCIe peer-to-peer), or the network."""
GRANULARITIES = ("request", "layer")
MAX_BLOCK_TOKENS = 1 << 20
PROBE_BYTES = float(1 << 26)
"""A message large enough that the send/recv time is all bandwidth: the link's rate is read off it."""


class TransportConstants(BaseModel):
    """What a transfer engine adds on one path (data/kv.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    per_message_us: float = Field(ge=0, allow_inf_nan=False)
    per_request_us: float = Field(ge=0, allow_inf_nan=False)
    basis: str


class KvConstants(BaseModel):
    """data/kv.yaml, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: str
    as_of: date
    transports: dict[str, TransportConstants]
    default_block_tokens: int = Field(ge=1)
    load_share: float = Field(gt=0, lt=1)


@functools.cache
def kv_constants() -> KvConstants:
    """The packaged KV-transfer constants, validated once (and kept between starts)."""
    return built_cache.cached("kv", [KV_FILE], (Path(__file__),), _validated)


def _validated() -> KvConstants:
    try:
        constants = KvConstants.model_validate(parse_yaml(KV_FILE.read_text(encoding="utf-8")))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(KV_FILE), err["msg"], field=".".join(map(str, err["loc"]))) from None
    if set(constants.transports) != set(PATHS):
        raise DataError(str(KV_FILE), f"needs exactly the transports {', '.join(PATHS)}", field="transports")
    return constants


@dataclass(frozen=True)
class KvOptions:
    """How the KV cache is paged and sent."""

    transport: str = "auto"
    block_tokens: int | None = None
    """Tokens per page; None: data/kv.yaml's default."""
    granularity: str = "request"
    overlap: bool = False
    """Send stage by stage while the prefill runs (per chunk; per layer too with `layer` granularity)."""

    @property
    def block(self) -> int:
        """Tokens per page in force."""
        return self.block_tokens if self.block_tokens is not None else kv_constants().default_block_tokens


def check_options(opts: KvOptions, context_tokens: int) -> None:
    """A transport, granularity and block size that exist; a block of 1 up to the context (UserError)."""
    if opts.transport not in KV_TRANSPORTS:
        raise UserError(f"must be one of {', '.join(KV_TRANSPORTS)} (got '{opts.transport}')", field="kv_transport")
    if opts.granularity not in GRANULARITIES:
        raise UserError(f"must be one of {', '.join(GRANULARITIES)} (got '{opts.granularity}')",
                        field="kv_granularity")
    if not 1 <= opts.block <= context_tokens:
        raise UserError(f"must be between 1 and the context of {context_tokens} tokens (got {opts.block})",
                        field="block_tokens")


@dataclass(frozen=True)
class Link:
    """One path between a prefill GPU and a decode GPU as the collective model prices a send/recv on it."""

    path: str
    latency_us: float
    gb_per_s: float
    """Per GPU, per direction."""


def scale_up_path(system: System) -> str:
    """The path between two GPUs of one scale-up domain: nvlink, xgmi or pcie."""
    kind = system.node.scale_up.kind
    if system.node.scale_up.is_nvlink:
        return "nvlink"
    return "xgmi" if kind == "xgmi-mesh" else "pcie"


def tcp_system(system: System) -> System:
    """The System with its NICs running TCP (sockets through the host) instead of their own transport."""
    so = replace(system.node.scale_out, fabric="tcp", gpudirect_rdma=False, sharp=False, transport=None)
    return replace(system, node=replace(system.node, scale_out=so))


def link(system: System, tiers: CommTiers, path: str, senders_per_node: int = 1) -> Link:
    """The send/recv latency and per-GPU bandwidth of `path` on the System (`tiers` as resolved for it), with
    `senders_per_node` GPUs of a node sending at once across the network (each on its own NIC while there are
    enough, else sharing them)."""
    if path in ("nvlink", "xgmi", "pcie"):
        return _priced(path, tiers, 1)
    if system.node.scale_out.fabric == "none":
        raise UserError(f"{path}: {system.id} has no network between nodes", field="kv_transport")
    if path == "tcp" and tiers.fabric != "tcp":
        tiers = comm_tiers(tcp_system(system))
    check_multi_node(tiers, 2)
    latency_us = _priced(path, tiers, 2).latency_us
    nics = max(1, system.node.scale_out.nics)
    # NCCL counts a rack's NVLink domain as one node with every tray's NICs; a tray sends on its own.
    node_nic_gb_per_s = tiers.nic_node_gb_per_s * system.node.gpus / tiers.gpus_per_node
    return Link(path, latency_us, node_nic_gb_per_s / max(senders_per_node, nics))


def _priced(path: str, tiers: CommTiers, nodes: int) -> Link:
    time_us = collective_time("sendrecv", tiers, [1.0, PROBE_BYTES], 2, nodes, labels=False).time_us
    latency_us = float(time_us[0])
    return Link(path, latency_us, PROBE_BYTES / (1e3 * (float(time_us[1]) - latency_us)))


@dataclass(frozen=True)
class KvTransfer:
    """One request's KV cache moved from its prefill instance to its decode instance."""

    path: str
    bytes_per_request: float
    """The prompt's KV cache once (every layer, every KV head)."""
    bytes_moved: float
    """What crosses the links: more than once a head when decode TP replicates KV heads."""
    pages: int
    """Pages of the prompt (per head shard)."""
    page_bytes: float
    """One message: one page of one shard as a decode rank receives it."""
    messages_busiest: float
    bytes_busiest: float
    link: Link
    per_message_us: float
    per_request_us: float

    @property
    def posting_s(self) -> float:
        """The busiest rank posting its pages, one after another."""
        return self.messages_busiest * self.per_message_us * 1e-6

    @property
    def wire_s(self) -> float:
        """The busiest rank's bytes at the link's bandwidth."""
        return self.bytes_busiest / (self.link.gb_per_s * 1e9)

    @property
    def busy_s(self) -> float:
        """What one request keeps the busiest rank's link and posting thread busy for (its capacity share)."""
        return self.posting_s + self.wire_s

    @property
    def total_s(self) -> float:
        """The whole transfer after the prefill, not overlapped: control round trip, first latency, pages."""
        return (self.per_request_us + self.link.latency_us) * 1e-6 + self.busy_s

    @property
    def gb_per_s(self) -> float:
        """What the busiest rank achieves over the whole transfer (the figure KV benchmarks print)."""
        return self.bytes_busiest / self.total_s / 1e9

    def exposed_s(self, prefill_s: float, stages: int) -> float:
        """What the transfer adds after the prefill when it leaves in `stages` stages as the prefill runs."""
        if stages <= 1:
            return self.total_s
        step_s = self.busy_s / stages + self.link.latency_us * 1e-6
        compute_s = prefill_s / stages
        return self.per_request_us * 1e-6 + max(step_s, stages * step_s - (stages - 1) * compute_s)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"path": self.path, "bytes_per_request": self.bytes_per_request, "bytes_moved": self.bytes_moved,
                "pages": self.pages, "page_bytes": self.page_bytes, "messages_busiest_rank": self.messages_busiest,
                "bytes_busiest_rank": self.bytes_busiest, "link_gb_per_s": self.link.gb_per_s,
                "link_latency_us": self.link.latency_us, "per_message_us": self.per_message_us,
                "per_request_us": self.per_request_us, "posting_s": self.posting_s, "wire_s": self.wire_s,
                "transfer_s": self.total_s, "gb_per_s": self.gb_per_s}


def price_transfer(model: ModelConfig, kv_precision: str, input_tokens: int, prefill_tp: int, decode_tp: int,
                   link_: Link, opts: KvOptions) -> KvTransfer:
    """One prompt's KV cache from a prefill instance of `prefill_tp` ranks to a decode replica of `decode_tp`."""
    whole = input_tokens * kv_cache_bytes_per_token(model, kv_precision)
    sent_shards, received_shards = min(prefill_tp, model.kv_heads), min(decode_tp, model.kv_heads)
    moved = whole * decode_tp / received_shards
    pages = math.ceil(input_tokens / opts.block) * (model.layers if opts.granularity == "layer" else 1)
    # A decode rank's heads come from every prefill rank that holds some of them, a message each per page.
    senders_per_receiver = max(1, sent_shards // received_shards)
    messages = pages * decode_tp * senders_per_receiver
    c = kv_constants().transports[link_.path]
    return KvTransfer(path=link_.path, bytes_per_request=whole, bytes_moved=moved, pages=pages,
                      page_bytes=moved / messages,
                      messages_busiest=messages / min(prefill_tp, decode_tp),
                      bytes_busiest=moved / min(prefill_tp, decode_tp), link=link_,
                      per_message_us=c.per_message_us, per_request_us=c.per_request_us)


def stream_s(link_: Link, messages: float, nbytes: float) -> float:
    """`messages` pages of `nbytes` bytes in all, posted at once by one rank over `link_`, with no control round
    trip: what `bench kv` times for one pair."""
    per_message_us = kv_constants().transports[link_.path].per_message_us
    return (link_.latency_us + messages * per_message_us) * 1e-6 + nbytes / (link_.gb_per_s * 1e9)


def stages(opts: KvOptions, model: ModelConfig, input_tokens: int) -> int:
    """How many stages the transfer leaves in while the prefill runs (1: all after it)."""
    if not opts.overlap:
        return 1
    chunks = math.ceil(input_tokens / compute_constants().prefill_chunk_tokens)
    return chunks * (model.layers if opts.granularity == "layer" else 1)
