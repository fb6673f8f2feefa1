"""The collective model against the seeds' arithmetic, nccl-tests' conventions and NCCL's own constants."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.comm.collectives import collective_time
from linkscope.model.comm.params import nccl_tuning
from linkscope.model.comm.tiers import comm_tiers
from linkscope.results.busbw import bus_factors


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def test_seed_20gb_at_128_vs_900_gb_per_s(db) -> None:
    # Seed 001: 20 GB of TP traffic takes ~156 ms over one 128 GB/s mesh link and ~22 ms at NVSwitch's 900 GB/s
    # (both bidirectional datasheet figures, as the seed quotes them).
    mesh = db.systems["p2p-mesh-h200"].node.scale_up.pair_bw_gb_per_s() * 2
    switch = db.systems["hgx-h200"].node.scale_up.pair_bw_gb_per_s() * 2
    assert 20e9 / (mesh * 1e9) == pytest.approx(0.156, rel=0.02)
    assert 20e9 / (switch * 1e9) == pytest.approx(0.022, rel=0.02)


def test_tp2_allreduce_on_mesh_is_about_seven_times_slower(db) -> None:
    size = [20 * 10**9]
    mesh = predict_sizes(db.systems["p2p-mesh-h200"], "all_reduce", size, gpus=2)[0]
    switch = predict_sizes(db.systems["hgx-h200"], "all_reduce", size, gpus=2)[0]
    assert mesh.time_us / switch.time_us == pytest.approx(7.0, rel=0.05)
    assert mesh.bottleneck == "nvlink"


def test_ring_allreduce_takes_2n_minus_2_steps(db) -> None:
    # At a tiny size the ring's time is its latency: base + 2(n-1) hops of NVLink latency (LL protocol).
    tiers = comm_tiers(db.systems["dgx-a100"])
    tune = nccl_tuning()
    for n in (2, 4, 8):
        got = collective_time("all_reduce", tiers, 8, n, 1, algo="ring").time_us[0]
        expected = tune.base_latency_us["ring"][0] + 2 * (n - 1) * tune.hw_latency_us["nvlink"]["ring"][0]
        assert got == pytest.approx(expected, rel=1e-3)


def test_nvls_needs_fewer_steps_than_a_ring(db) -> None:
    # NVSwitch multicast: latency independent of n, versus the ring's 2(n-1) hops (seed 001, MultiShot).
    tiers = comm_tiers(db.systems["dgx-h100"])
    nvls = collective_time("all_reduce", tiers, [8, 8], [2, 8], 1, algo="nvls").time_us
    ring = collective_time("all_reduce", tiers, [8, 8], [2, 8], 1, algo="ring").time_us
    assert nvls[0] == pytest.approx(nvls[1], abs=0.01)
    assert ring[1] > ring[0]


def test_nvswitch_keeps_pair_bandwidth_while_mesh_splits_it(db) -> None:
    mesh, switch = comm_tiers(db.systems["p2p-mesh-h200"]), comm_tiers(db.systems["hgx-h200"])
    assert switch.pair_bw() / mesh.pair_bw() == pytest.approx(7.0)
    # The whole 8-GPU mesh uses all 7 links at once, so a full-domain collective is not slowed.
    assert mesh.intra_bw(8) == pytest.approx(switch.intra_bw(8))


def test_bus_factors_follow_nccl_tests() -> None:
    assert float(bus_factors("all_reduce", 8)) == pytest.approx(14 / 8)
    for op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        assert float(bus_factors(op, 8)) == pytest.approx(7 / 8)
    for op in ("broadcast", "reduce", "sendrecv"):
        assert float(bus_factors(op, 8)) == 1.0


def test_large_allreduce_busbw_is_bounded_by_nccls_link_model(db) -> None:
    # NCCL plans A100 NVLink at 12 links x 20 GB/s = 240 GB/s: a ring's busbw approaches it, never passes it.
    big = predict_sizes(db.systems["dgx-a100"], "all_reduce", [8 * 2**30], gpus=8)[0]
    assert big.algorithm == "ring" and big.protocol == "Simple"
    assert 220 < big.busbw <= 240
    # Across nodes the 8 x 200 Gbit/s HDR NICs bound the ring: 200 GB/s at NCCL's 0.96.
    multi = predict_sizes(db.systems["dgx-a100"], "all_reduce", [8 * 2**30], gpus=64)[0]
    assert multi.bottleneck.startswith("network") and 150 < multi.busbw <= 192


def test_protocols_switch_with_size(db) -> None:
    rows = predict_sizes(db.systems["dgx-a100"], "all_reduce", [1024, 16 * 2**20, 2**30], gpus=8)
    assert [r.protocol for r in rows] == ["LL", "LL128", "Simple"]


def test_nvls_is_chosen_on_hopper_for_large_messages_only(db) -> None:
    small, large = predict_sizes(db.systems["dgx-h100"], "all_reduce", [4096, 2**30], gpus=8)
    assert small.algorithm == "ring" and large.algorithm == "nvls"
    assert large.busbw > 1.1 * 370.8  # in-switch reduction beats the ring's link-bound busbw


def test_fabrics_rank_as_expected(db) -> None:
    def busbw(fabric: str) -> float:
        from dataclasses import replace
        base = db.systems["dgx-h100"]
        so = replace(base.node.scale_out, fabric=fabric, gpudirect_rdma=fabric != "tcp")
        system = replace(base, node=replace(base.node, scale_out=so))
        return predict_sizes(system, "all_reduce", [2**30], gpus=32, algo="ring")[0].busbw
    assert busbw("infiniband") > busbw("roce") > busbw("efa") > busbw("tcp")


def test_pcie_box_is_bound_by_the_socket_link(db) -> None:
    row = predict_sizes(db.systems["pcie-l40s"], "all_reduce", [2**30], gpus=8)[0]
    assert row.bottleneck == "inter-socket"
    within_socket = predict_sizes(db.systems["pcie-l40s"], "all_reduce", [2**30], gpus=4)[0]
    assert within_socket.busbw > row.busbw


def test_unavailable_algorithms_are_user_errors(db) -> None:
    with pytest.raises(UserError, match="nvls"):
        predict_sizes(db.systems["dgx-a100"], "all_reduce", [2**20], gpus=8, algo="nvls")
    with pytest.raises(UserError, match="does not implement"):
        predict_sizes(db.systems["dgx-a100"], "all_gather", [2**20], gpus=8, algo="tree")
    with pytest.raises(UserError, match="whole nodes"):
        predict_sizes(db.systems["dgx-a100"], "all_reduce", [2**20], gpus=12)
    with pytest.raises(UserError, match="no scale-out"):
        from dataclasses import replace
        from linkscope.hardware.system import NO_SCALE_OUT
        base = db.systems["dgx-a100"]
        predict_sizes(replace(base, node=replace(base.node, scale_out=NO_SCALE_OUT)), "all_reduce", [8], gpus=16)


def test_vectorized_over_sizes_and_ranks(db) -> None:
    tiers = comm_tiers(db.systems["dgx-h100"])
    out = collective_time("all_gather", tiers, np.array([2**20, 2**24, 2**28]), np.array([8, 16, 64]),
                          np.array([1, 2, 8]))
    assert out.time_us.shape == (3,)
    assert np.all(np.diff(out.time_us) > 0)
    assert collective_time("all_reduce", tiers, 2**20, 1, 1).time_us[0] == 0.0


def test_predict_collective_cli_json_and_sweep() -> None:
    import json

    from tests.cli.helpers import run_cli

    one = run_cli("predict", "collective", "--system", "dgx-h100", "--op", "all_gather", "--bytes", "1G",
                  "--gpus", "16", "--json")
    assert one.exit_code == 0, one.stderr
    data = json.loads(one.stdout)
    assert {"op", "bytes", "gpus", "nodes", "algorithm", "protocol", "time_us", "algbw", "busbw",
            "bottleneck"} <= set(data)
    assert (data["bytes"], data["gpus"], data["nodes"]) == (2**30, 16, 2)
    assert data["busbw"] == pytest.approx(data["algbw"] * 15 / 16)
    sweep = run_cli("predict", "collective", "--system", "aws/p5.48xlarge", "--bytes", "1M", "--sweep", "--json")
    rows = json.loads(sweep.stdout)
    assert [r["bytes"] for r in rows] == [2**k for k in range(3, 21)]
    bad = run_cli("predict", "collective", "--system", "dgx-a100", "--op", "all_reduce", "--algo", "nvls")
    assert bad.exit_code == 2 and "nvls" in bad.stderr
