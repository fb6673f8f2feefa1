"""MoE dispatch/combine model: destinations per token, the bandwidth convention, and bad input."""

from __future__ import annotations

import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.calibration.systems import resolve
from linkscope.model.comm.moe import MoeRequest, destinations, predict_moe, token_bytes

V3 = dict(tokens_per_rank=4096, hidden=7168, topk=8, experts=256)


def _tiers(ep: int):  # type: ignore[no-untyped-def]
    return resolve("dgx-h100", load_db([]), ep, None).tiers


def test_a_token_routed_to_two_experts_of_one_rank_travels_once() -> None:
    ranks, nodes, ppn, n = destinations(MoeRequest(ep=2, tokens_per_rank=1, hidden=1, topk=2, experts=2), 8)
    assert (ranks, nodes, ppn, n) == (2.0, 1.0, 2, 1)
    ranks, _, _, _ = destinations(MoeRequest(ep=1, tokens_per_rank=1, hidden=1, topk=8, experts=256), 8)
    assert ranks == 1.0


def test_node_limited_routing_caps_nodes_per_token() -> None:
    free = destinations(MoeRequest(ep=64, **V3), 8)
    limited = destinations(MoeRequest(ep=64, max_nodes_per_token=4, **V3), 8)
    assert free[1] > 4 and limited[1] <= 4
    assert limited[0] < free[0] * 1.01


def test_fp8_dispatch_carries_one_scale_per_128_elements() -> None:
    dispatch, combine = token_bytes(7168, 8, "fp8")
    assert dispatch == 7168 + 56 * 4 + 8 * 8
    assert combine == 7168 * 2


def test_inside_one_node_bandwidth_is_received_copies_over_time() -> None:
    p = predict_moe(_tiers(8), MoeRequest(ep=8, **V3))
    assert p.nodes == 1 and p.bottleneck == "nvlink"
    dispatch, _ = token_bytes(7168, 8, "fp8")
    assert p.bytes_per_rank == pytest.approx(4096 * p.ranks_per_token * dispatch)
    assert p.dispatch_gb_per_s == pytest.approx(p.bytes_per_rank / p.dispatch_us / 1e3)


def test_across_nodes_bytes_count_once_per_destination_node() -> None:
    p = predict_moe(_tiers(32), MoeRequest(ep=32, max_nodes_per_token=4, **V3))
    dispatch, _ = token_bytes(7168, 8, "fp8")
    assert p.nodes == 4
    assert p.bytes_per_rank == pytest.approx(4096 * p.nodes_per_token * dispatch)
    assert p.bottleneck == "rdma"
    # Crossing the network is slower per convention byte than staying on NVLink.
    assert p.dispatch_gb_per_s < predict_moe(_tiers(8), MoeRequest(ep=8, **V3)).dispatch_gb_per_s


def test_imbalance_slows_the_busiest_rank() -> None:
    even = predict_moe(_tiers(16), MoeRequest(ep=16, **V3))
    skewed = predict_moe(_tiers(16), MoeRequest(ep=16, imbalance=1.5, **V3))
    assert skewed.dispatch_us > even.dispatch_us * 1.3


def test_nccl_all_to_all_moves_a_copy_per_expert_and_is_slower_than_the_hierarchical_kernel() -> None:
    tiers = _tiers(32)
    big_normal = predict_moe(tiers, MoeRequest(ep=32, kernel="normal", precision="bf16", **V3))
    big_nccl = predict_moe(tiers, MoeRequest(ep=32, kernel="nccl", precision="bf16", **V3))
    assert big_nccl.dispatch_us > big_normal.dispatch_us


@pytest.mark.parametrize(("changes", "words"), [
    ({"topk": 300}, "--topk 300 is larger than --experts 256"),
    ({"ep": 12}, "--ep 12 does not divide the 256 experts"),
    ({"tokens_per_rank": 0}, "--tokens-per-rank must be between 1"),
    ({"tokens_per_rank": -5}, "--tokens-per-rank must be between 1"),
    ({"imbalance": 0.5}, "--imbalance must be between 1"),
    ({"imbalance": float("inf")}, "--imbalance must be between 1"),
    ({"kernel": "deepep"}, "--kernel must be one of"),
])
def test_bad_input_names_the_flag(changes: dict[str, object], words: str) -> None:
    fields: dict[str, object] = {"ep": 8, **V3, **changes}
    with pytest.raises(UserError) as err:
        predict_moe(_tiers(8), MoeRequest(**fields))  # type: ignore[arg-type]
    assert words in str(err.value)


def test_a_node_without_nvlink_is_limited_by_pcie_and_says_so() -> None:
    pcie = resolve("pcie-l40s", load_db([]), 8, None).tiers
    p = predict_moe(pcie, MoeRequest(ep=8, **V3))
    assert p.bottleneck == "pci"
    assert p.dispatch_gb_per_s < predict_moe(_tiers(8), MoeRequest(ep=8, **V3)).dispatch_gb_per_s / 10
