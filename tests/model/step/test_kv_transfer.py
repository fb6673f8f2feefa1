"""KV-cache transfer between pools: the cache's size, the path's physics, pages and overlap."""

from __future__ import annotations

from dataclasses import replace

import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.step.infer import kv_cache_bytes_per_token
from linkscope.model.step.kv_transfer import KvOptions, check_options, kv_constants, link, price_transfer
from linkscope.model.step.transformer import model_presets

PROMPT = 8192


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


@pytest.fixture(scope="module")
def llama70b():
    return model_presets()["llama3-70b"]


def _one_request(system, model, path: str, tp: int = 1, opts: KvOptions = KvOptions(), senders: int = 1):
    tiers = comm_tiers(system)
    return price_transfer(model, "bf16", PROMPT, tp, tp, link(system, tiers, path, senders), opts)


def test_llama_70b_caches_320_kib_per_token_in_bf16_and_half_in_fp8(llama70b) -> None:
    # 80 layers x 8 KV heads x 128 x (K and V) x 2 bytes.
    assert kv_cache_bytes_per_token(llama70b, "bf16") == 320 * 1024
    assert kv_cache_bytes_per_token(llama70b, "fp8") == 160 * 1024


def test_an_8k_prompt_moves_in_milliseconds_on_nvswitch_tens_over_a_nic_and_a_second_over_tcp(db, llama70b) -> None:
    h100 = db.systems["dgx-h100"].with_nodes(2)
    nvswitch = _one_request(h100, llama70b, "nvlink")
    rdma = _one_request(h100, llama70b, "rdma")
    # 2.7 GB at one 400 Gbit/s NIC's 48 GB/s is 56 ms; NVSwitch carries it about ten times faster.
    assert rdma.bytes_per_request == pytest.approx(2.68e9, rel=0.01)
    assert 0.050 < rdma.total_s < 0.065
    assert nvswitch.total_s < rdma.total_s / 5
    so = replace(h100.node.scale_out, fabric="tcp", nics=1, nic_gbit_per_s=25.0, gpudirect_rdma=False)
    slow = replace(h100, node=replace(h100.node, scale_out=so))
    tcp = _one_request(slow, llama70b, "tcp")
    # 25 Gbit/s is 3.1 GB/s on the wire, so at least 0.86 s; TCP's socket path gets less than the wire.
    assert tcp.total_s > 0.86


def test_small_pages_cost_per_message_and_large_ones_reach_the_link(db, llama70b) -> None:
    h100 = db.systems["dgx-h100"].with_nodes(2)
    big = _one_request(h100, llama70b, "rdma", opts=KvOptions(block_tokens=128))
    tiny = _one_request(h100, llama70b, "rdma", opts=KvOptions(block_tokens=1, granularity="layer"))
    assert tiny.messages_busiest == PROMPT * 80 and big.messages_busiest == PROMPT / 128
    assert tiny.total_s > 1.5 * big.total_s
    assert big.gb_per_s > 0.9 * big.link.gb_per_s


def test_cuda_ipc_pays_more_per_page_than_rdma(db, llama70b) -> None:
    # vLLM #55434: with many small descriptors an intra-node copy engine path can lose to RDMA.
    h100 = db.systems["dgx-h100"].with_nodes(2)
    opts = KvOptions(block_tokens=1, granularity="layer")
    assert _one_request(h100, llama70b, "nvlink", 8, opts).posting_s > 10 * _one_request(
        h100, llama70b, "rdma", 8, opts).posting_s


def test_tensor_parallel_ranks_send_their_shards_in_parallel(db, llama70b) -> None:
    h100 = db.systems["dgx-h100"].with_nodes(2)
    one = _one_request(h100, llama70b, "rdma", tp=1, senders=1)
    eight = _one_request(h100, llama70b, "rdma", tp=8, senders=8)
    assert eight.bytes_busiest == pytest.approx(one.bytes_busiest / 8)
    assert eight.total_s < one.total_s / 4


def test_nics_are_shared_when_a_node_has_fewer_than_its_senders(db, llama70b) -> None:
    h100 = db.systems["dgx-h100"].with_nodes(2)
    so = replace(h100.node.scale_out, nics=1)
    single_nic = replace(h100, node=replace(h100.node, scale_out=so))
    tiers = comm_tiers(single_nic)
    assert link(single_nic, tiers, "rdma", 8).gb_per_s == pytest.approx(link(single_nic, tiers, "rdma", 1).gb_per_s / 8)


def test_overlap_hides_the_transfer_behind_a_long_prefill(db, llama70b) -> None:
    h100 = db.systems["dgx-h100"].with_nodes(2)
    t = _one_request(h100, llama70b, "rdma", tp=8, senders=8, opts=KvOptions(granularity="layer", overlap=True))
    prefill_s = 0.4
    assert t.exposed_s(prefill_s, 1) == pytest.approx(t.total_s)
    assert t.exposed_s(prefill_s, 80) < t.total_s / 10
    # A prefill faster than the link cannot hide it: the transfer still shows almost whole.
    assert t.exposed_s(1e-6, 80) > 0.9 * t.total_s


@pytest.mark.parametrize(("opts", "field"), [
    (KvOptions(block_tokens=0), "block_tokens"),
    (KvOptions(block_tokens=PROMPT + 513), "block_tokens"),
    (KvOptions(transport="ethernet"), "kv_transport"),
    (KvOptions(granularity="token"), "kv_granularity"),
])
def test_bad_options_name_their_field(opts: KvOptions, field: str) -> None:
    with pytest.raises(UserError) as err:
        check_options(opts, PROMPT + 512)
    assert err.value.field == field


def test_a_system_without_a_network_has_no_rdma_path(db) -> None:
    box = db.systems["dgx-h100"]
    lone = replace(box, node=replace(box.node, scale_out=replace(box.node.scale_out, fabric="none")))
    with pytest.raises(UserError, match="no network"):
        link(lone, comm_tiers(box), "rdma")


def test_constants_cover_every_path() -> None:
    c = kv_constants()
    assert set(c.transports) == {"nvlink", "xgmi", "pcie", "rdma", "tcp"}
    assert c.transports["nvlink"].per_message_us > c.transports["rdma"].per_message_us
