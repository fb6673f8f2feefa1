"""The collective model against the seeds' arithmetic, nccl-tests' conventions and NCCL's own constants."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from linkscope.model.comm.predict import predict_sizes
from linkscope.model.comm.collectives import _channel_units, _shape, collective_time
from linkscope.model.comm.params import comm_fit, nccl_tuning
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
    # At a tiny size the ring's time is its latency: base + 2(n-1) hops of NVLink latency (LL protocol);
    # 8 bytes on one channel of three warps add a hundredth of a microsecond. With one thread at work an A100
    # hop is NCCL's too (its fitted multiple needs every channel's threads).
    tune = nccl_tuning()
    for system in ("dgx-h100", "dgx-a100"):
        tiers = comm_tiers(db.systems[system])
        for n in (2, 4, 8):
            got = collective_time("all_reduce", tiers, 8, n, 1, algo="ring").time_us[0]
            hop = tune.hw_latency_us["nvlink"]["ring"][0]
            assert got == pytest.approx(tune.base_latency_us["ring"][0] + 2 * (n - 1) * hop, rel=1e-2), system


def test_an_a100_hop_grows_with_the_threads_at_work_up_to_the_fitted_scale(db) -> None:
    """ABCI's A100 sweep: 4-512 B at about NCCL's hop, 4-16 KiB at about twice it, and from 128 KiB at the fitted
    multiple; each doubling of the threads at work adds the same time, and H100 keeps NCCL's hop at every size."""
    from linkscope.model.comm.collectives import _ring_hop_us, _shape

    scale = comm_fit().ampere_nvlink_hop_scale
    nccl_hop = nccl_tuning().hw_latency_us["nvlink"]["ring"][0]
    sizes = [4, 4096, 16384, 2**20, 2**30]
    a100 = _ring_hop_us(comm_tiers(db.systems["dgx-a100"]), _shape(sizes, 8, 1), 0)
    assert a100[0] == pytest.approx(nccl_hop)
    assert list(a100) == sorted(a100)
    assert 1.5 < a100[1] / nccl_hop < 2.5
    assert a100[-1] == pytest.approx(nccl_hop * scale)
    h100 = _ring_hop_us(comm_tiers(db.systems["dgx-h100"]), _shape(sizes, 8, 1), 0)
    assert list(h100) == pytest.approx([nccl_hop] * len(sizes))


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


def test_tcp_sockets_are_held_to_what_nccl_achieves_not_the_line_rate(db) -> None:
    from dataclasses import replace

    def nic_node_gb_per_s(fabric: str, gbit: float, transport: str | None = None) -> float:
        base = db.systems["dgx-h100"]
        so = replace(base.node.scale_out, fabric=fabric, nic_gbit_per_s=gbit, transport=transport,
                     gpudirect_rdma=fabric != "tcp")
        return comm_tiers(replace(base, node=replace(base.node, scale_out=so))).nic_node_gb_per_s

    # 8 x 400 Gbit/s over sockets: 6 GB/s per NIC (NVIDIA/nccl#450), an eighth of InfiniBand, not 0.6 of it.
    assert nic_node_gb_per_s("tcp", 400) == pytest.approx(8 * 6.0)
    assert nic_node_gb_per_s("infiniband", 400) == pytest.approx(8 * 50.0 * 0.96)
    # Slow NICs stay below the ceiling (0.6 of 25 Gbit/s); GPUDirect-TCPX is not the socket transport.
    assert nic_node_gb_per_s("tcp", 25) == pytest.approx(8 * 3.125 * 0.6)
    assert nic_node_gb_per_s("tcp", 200, "tcpxo") == pytest.approx(8 * 25.0 * 0.85)


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


def _nccl_channels_and_threads(nbytes: int, proto: int, nranks: int, ring: bool) -> tuple[int, int]:
    """A transcription of NCCL's loop (src/enqueue.cc, topoGetAlgoInfo) for ring and tree."""
    tune = nccl_tuning()
    nc, nt = tune.coll_channels, int(tune.max_threads[proto])
    threshold = tune.thread_threshold[proto] * (nranks if ring and proto == 0 else 1)
    while nbytes < nc * nt * threshold and nc >= 2:
        nc -= 1
    if ring:
        while nbytes < nc * nt * threshold and nt % 128 == 0:
            nt //= 2
        nt = max(nt, 96)
    else:
        nt = int(tune.max_threads[proto])  # tree kernels use every thread
    return nc, nt


@pytest.mark.parametrize("nbytes", [8, 4096, 32768, 65536, 196608, 1 << 20, 1 << 24, 1 << 30])
@pytest.mark.parametrize("proto", [0, 1, 2])
def test_channel_units_are_nccls_channel_and_thread_choice(nbytes: int, proto: int) -> None:
    tune = nccl_tuning()
    for ring in (True, False):
        nc, nt = _nccl_channels_and_threads(nbytes, proto, 8, ring)
        units = _channel_units(_shape(nbytes, 8, 1), proto, ring_ll=ring and proto == 0, halve_threads=ring)[0]
        assert units == pytest.approx(nc * nt / tune.max_threads[proto]), (ring, nc, nt)


def test_protocol_switches_from_ll_to_ll128_to_simple_as_size_grows(db) -> None:
    sizes = [2**k for k in range(3, 34)]
    rows = predict_sizes(db.systems["dgx-a100"], "all_reduce", sizes, gpus=8, algo="ring")
    order = {"LL": 0, "LL128": 1, "Simple": 2}
    protocols = [order[r.protocol] for r in rows]
    assert protocols == sorted(protocols)
    assert protocols[0] == 0 and protocols[-1] == 2 and 1 in protocols


def test_small_messages_run_on_fewer_channels(db) -> None:
    # 64 KiB of ring LL on 8 ranks fills two of NCCL's 24 channels (512 threads x 64 bytes each), so it moves
    # at two channels' worth (each at most twice an even share of LL's 141 GB/s, the channels being
    # duplicated, and at most NCCL's per-channel cap), not at the links' rate; from about 1 MiB all run.
    tiers = comm_tiers(db.systems["dgx-h100"])
    tune = nccl_tuning()
    latency = tune.base_latency_us["ring"][0] + 14 * tune.hw_latency_us["nvlink"]["ring"][0]
    t64k, t1m = collective_time("all_reduce", tiers, [65536, 2**20], 8, 1, algo="ring").time_us
    ll_cap = tune.ll_max_bw["hopper"][0]
    per_channel = min(tune.per_channel_max_ring_ll128_bw["hopper"][0] * 0.5 / tune.ll128_efficiency,
                      2 * ll_cap / tune.coll_channels)
    assert t64k == pytest.approx(latency + 65536 * 14 / 8 / (1000 * 2 * per_channel), rel=1e-3)
    assert t1m == pytest.approx(latency + 2**20 * 14 / 8 / (1000 * ll_cap), rel=1e-3)


def _recorded_vs_predicted(db, fixture_name: str, system_id: str) -> dict[int, float]:
    from pathlib import Path

    from linkscope.hardware.resolve import resolve_system
    from linkscope.results.nccltests.importer import parse_nccl_tests_file

    fixture = Path(__file__).parents[2] / "fixtures" / "nccl_tests" / fixture_name
    rows = [r for r in parse_nccl_tests_file(fixture).rows if r.placement == "out_of_place"]
    predicted = predict_sizes(resolve_system(system_id, db), "all_reduce", [r.size_bytes for r in rows], 8)
    return {r.size_bytes: p.time_us / r.time_us for r, p in zip(rows, predicted)}


def test_a_recorded_h100_sweep_is_predicted_in_every_regime(db) -> None:
    # p5.48xlarge (8 x H100, NVSwitch with NVLS), one process per GPU: latency (ring LL on the channels
    # NCCL launches), mid-size (NVLS at its smaller chunks) and plateau all within 20%, half within 6%.
    ratios = _recorded_vs_predicted(db, "v2.13_all_reduce_h100_8gpu_p5_mpi_prefixed.txt", "aws/p5.48xlarge")
    errors = [abs(r - 1.0) for size, r in ratios.items() if size >= 64]
    assert max(errors) < 0.20
    assert float(np.median(errors)) < 0.06


def test_recorded_h100_mid_sizes_run_ring_ll128_not_nvls(db) -> None:
    # p5.48xlarge, 4 to 16 MiB: 55, 84 and 124 us, what NCCL's ring LL128 estimate gives, not NVLS at NCCL's
    # 25 us (docs/model.md, NVLS synchronisation on one node). The 8 MiB row is not an evidence entry.
    ratios = _recorded_vs_predicted(db, "v2.13_all_reduce_h100_8gpu_p5_mpi_prefixed.txt", "aws/p5.48xlarge")
    for size in (2**22, 2**23, 2**24):
        assert ratios[size] == pytest.approx(1.0, abs=0.13), size
    system = db.systems["dgx-h100"]
    picked = predict_sizes(system, "all_reduce", [2**23, 2**30], 8)
    assert (picked[0].algorithm, picked[0].protocol) == ("ring", "LL128")
    assert picked[1].algorithm == "nvls"


def test_a_recorded_a100_sweep_driven_by_one_thread(db) -> None:
    # OCI BM.GPU4.8 (8 x A100 40GB), one thread driving all 8 GPUs (-t 1 -g 8), priced as the GPUs' time: the
    # plateau within 15%, and 256 KiB .. 32 MiB, where the A100 ring's hop scale and LL share (data/comm_fit.yaml)
    # apply, within 20% (45% short before them). Smaller sizes run at the host's pace, 32 us, which the GPUs'
    # time alone overshoots by up to 40% there (the LL hop scale is fitted on mid sizes; docs/model.md).
    ratios = _recorded_vs_predicted(db, "v2.13_all_reduce_a100_8gpu_oci.txt", "oci/BM.GPU4.8")
    for size, ratio in ratios.items():
        if size >= 64 * 2**20:
            assert ratio == pytest.approx(1.0, abs=0.15), size
        elif size >= 256 * 2**10:
            assert ratio == pytest.approx(1.0, abs=0.20), size
        else:
            assert ratio < 1.4, size


def test_nvls_pays_for_smaller_chunks_only_below_ncclS_default_chunking(db) -> None:
    # 8 H100s: 16 channels x 8 heads; NCCL chunks at 128 KiB from 64 x 128 x 128 KiB = 1 GiB up, so the
    # fitted per-chunk overhead adds nothing there and something at 256 MiB (64 KiB chunks).
    from linkscope.model.comm.collectives import _nvls_chunk_extra_us
    from linkscope.model.comm.params import comm_fit

    tiers = comm_tiers(db.systems["dgx-h100"])
    extra = _nvls_chunk_extra_us(tiers, _shape([2**28, 2**30, 2**34], 8, 1))
    per_chunk = comm_fit().nvls_chunk_overhead_us
    assert extra[1] == 0.0 and extra[2] == 0.0
    assert extra[0] == pytest.approx(per_chunk * 2**28 / 128 * (1 / 65536 - 1 / 131072))


def test_nvls_tree_takes_ncclS_tree_correction(db) -> None:
    tiers = comm_tiers(db.systems["dgx-h100"])
    tune = nccl_tuning()
    size = 2**24  # log2(size / 64) = 18
    got = collective_time("all_reduce", tiers, size, 16, 2, algo="nvls_tree").time_us[0]
    uncorrected_lat = tune.hw_latency_us["nvlink"]["nvls_tree"][2]
    assert got > uncorrected_lat + size / (1000.0 * 300.0)  # slower than any uncorrected NVLS-tree bandwidth
    inter_lat = tune.hw_latency_us["net"]["nvls_tree"][2] + 3 * tiers.net_overhead_us() + tiers.net_latency_us_extra
    lat = uncorrected_lat + 2 * inter_lat
    algbw = size / (1000.0 * (got - lat))
    full = collective_time("all_reduce", tiers, 2**36, 16, 2, algo="nvls_tree").time_us[0]
    assert algbw == pytest.approx(2**36 / (1000.0 * (full - lat)) * tune.tree_correction[2][18], rel=1e-6)


def _two_node_allreduce_us(db, system: str, size: int, protocols: tuple[str, ...] | None = None,
                           flush: bool | None = None) -> tuple[float, str]:
    from dataclasses import replace

    from linkscope.hardware.resolve import resolve_system

    s = resolve_system(system, db).with_gpus(16)
    tiers = comm_tiers(s)
    tiers = replace(tiers, protocols=protocols or tiers.protocols,
                    net_simple_flush=tiers.net_simple_flush if flush is None else flush)
    row = predict_sizes(s, "all_reduce", [size], 16, tiers=tiers)[0]
    return row.time_us, row.protocol


def test_efa_small_allreduce_pays_its_per_hop_cost_on_two_net_hops(db) -> None:
    from linkscope.model.comm.params import comm_fit

    # Two nodes: the tree crosses the network twice (up and down), each hop paying EFA's software path.
    efa_us, proto = _two_node_allreduce_us(db, "aws/p5.48xlarge", 64)
    ib_us, _ = _two_node_allreduce_us(db, "dgx-h100", 64)
    assert proto == "LL"
    assert efa_us - ib_us == pytest.approx(2 * comm_fit().efa_latency_us_extra, rel=0.05)
    # evidence/fabric_latency.yaml: 68.4-69.3 us (p5, 2025) and 55.6-57.1 us (p6-b200, 2026) at 32-256 B.
    assert 55.0 < efa_us < 70.0


def test_simple_only_runs_pay_the_flush_as_nccls_model_does(db) -> None:
    from linkscope.model.comm.params import comm_fit

    # aws-ofi-nccl sets NCCL_PROTO=simple on p4d; Simple pays the EFA cost twice per NET hop (the receiver's flush).
    auto_us, _ = _two_node_allreduce_us(db, "aws/p4d.24xlarge", 32)
    simple_us, proto = _two_node_allreduce_us(db, "aws/p4d.24xlarge", 32, ("Simple",))
    assert proto == "Simple" and simple_us > auto_us
    no_flush_us, _ = _two_node_allreduce_us(db, "aws/p4d.24xlarge", 32, ("Simple",), flush=False)
    assert simple_us - no_flush_us == pytest.approx(2 * comm_fit().efa_latency_us_extra)
    # aws-samples/aws-efa-eks (NCCL 2.8.3): 167.9 us at 32 B.
    assert simple_us == pytest.approx(167.9, rel=0.05)


def test_efa_per_hop_cost_is_the_collective_fits_and_a_fold_moves_it(db) -> None:
    """EFA's per-hop cost is a constant of the collective fit (comm_fit.yaml), not fabric data: a prediction made
    under another fit (a validate fold) pays that fit's cost."""
    from linkscope.model.comm.params import comm_fit, comm_fit_override, fabric_traits, with_nvls_fit

    assert fabric_traits()["efa"].latency_us_extra == "fitted"
    packaged_us, _ = _two_node_allreduce_us(db, "aws/p5.48xlarge", 64)
    fit = comm_fit()
    with comm_fit_override(with_nvls_fit(fit.nvls_chunk_overhead_us, fit.nvls_sync_us,
                                         efa_us=fit.efa_latency_us_extra + 5.0)):
        slower_us, _ = _two_node_allreduce_us(db, "aws/p5.48xlarge", 64)
    assert slower_us - packaged_us == pytest.approx(2 * 5.0, rel=0.05)


def test_a_fabric_without_a_fitted_constant_cannot_say_fitted(tmp_path) -> None:
    from linkscope.hardware.errors import DataError
    from linkscope.model.comm.params import FabricTable, _validated

    path = tmp_path / "fabrics.yaml"
    path.write_text("fabrics:\n  roce: {bw_efficiency: 0.9, latency_us_extra: fitted, basis: x}\n")
    with pytest.raises(DataError, match="roce"):
        _validated(path, FabricTable)


def test_infiniband_pays_no_fabric_extra_and_no_flush(db) -> None:
    from linkscope.hardware.resolve import resolve_system

    tiers = comm_tiers(resolve_system("dgx-h100", db))
    assert tiers.net_latency_us_extra == 0.0 and not tiers.net_simple_flush


def test_tcpx_runs_simple_across_nodes_and_every_protocol_inside_one(db) -> None:
    from linkscope.hardware.resolve import resolve_system

    # GCP's TCPX/TCPXO NCCL setup exports NCCL_PROTO=Simple (data/fabrics.yaml, tcpx net_protocols).
    system = resolve_system("gcp/a3-megagpu-8g", db)
    two = predict_sizes(system.with_gpus(16), "all_reduce", [64, 65536], 16)
    assert {row.protocol for row in two} == {"Simple"}
    one = predict_sizes(system, "all_reduce", [64], 8)[0]
    assert one.protocol == "LL"


def test_all_to_all_at_128_ranks_pays_for_every_remote_peer() -> None:
    from linkscope.hardware.loader import load_db
    from linkscope.model.calibration.systems import resolve
    from linkscope.model.comm.collectives import all_to_all_peer_us, collective_time

    small = 128 * 7168  # one token of 7168 bytes to each of 128 ranks: the bytes take no time
    times = {}
    for gpus in (16, 128):
        tiers = resolve("dgx-h100", load_db([]), gpus, None).tiers
        times[gpus] = float(collective_time("all_to_all", tiers, [small], gpus, gpus // 8).time_us[0])
        peer = float(all_to_all_peer_us("all_to_all", tiers, gpus, 8, gpus // 8))
        assert peer == (gpus - 8) * tiers.net_overhead_us()
        assert float(all_to_all_peer_us("all_gather", tiers, gpus, 8, gpus // 8)) == 0.0
    # 112 more remote peers at the tuner's per-operation CPU cost (1 us on Intel hosts): the per-peer term, not
    # the bytes, separates the two.
    assert times[128] - times[16] == pytest.approx(112 * 1.0, rel=0.1)
    one_node = resolve("dgx-h100", load_db([]), 8, None).tiers
    assert float(all_to_all_peer_us("all_to_all", one_node, 8, 8, 1)) == 0.0
