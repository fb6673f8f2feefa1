"""The evidence set, the fitting procedure and `validate`'s errors (regression limits, not timing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.step.compute import packaged_constants
from linkscope.model.fidelity.evidence import (
    CALIBRATION_SOURCE,
    EVIDENCE_FILE,
    KINDS,
    load_evidence,
    read_evidence,
)
from linkscope.model.comm.params import packaged_comm_fit
from linkscope.model.fidelity.comm_fit import (
    EFA_GRID_US,
    HOP_SCALE_GRID,
    HOST_GRID_US,
    LL_SHARE_GRID,
    OVERHEAD_GRID_US,
    SYNC_GRID_US,
    PricedCollectives,
)
from linkscope.model.fidelity.fit import (
    FINE_MIX,
    FINE_SHARE,
    INFER_FINE_HOST_US,
    INFER_FINE_KERNEL_US,
    INFER_FINE_SHARE,
    PricedSet,
)
from linkscope.model.fidelity.evidence_predict import allocated_memory_gib
from linkscope.model.fidelity.validate import (
    Validation,
    packaged_priced_collectives,
    packaged_validation,
    range_file,
    residual_of,
    stored_validation,
    validation_inputs,
)

# What `linkscope validate` printed when these limits were set; a change that makes any of them worse fails.
# Training rose from 7.0 when the 11 MLPerf LoRA entries (AMD's first training evidence) joined the joint fit.
# Inference rose from 6.2 (LORO from 5.7) when the fixed per-layer cost fitted per vendor gave way to the
# measured HBM share and kernel and host times fitted on every vendor together: MI300X no longer has a
# share of its own (docs/model.md, "Decode's fixed costs").
# Training: 7.3 with the 16 MoE training entries (the MoE layers' fixed time is fitted on four sources, so each
# left out is predicted from the other three) and the memory estimate that no longer over-counts.
# Collectives: 5.3 once nccl-tests' host floor (one thread issuing every GPU's call) joined the model; 6.2 with
# the two EFA floors of evidence/fabric_latency.yaml (p5 8% short, p6-b200 11-14% long: one per-hop EFA cost
# fitted on both sits between them).
# Inference: 7.0 (LORO 6.0) with the serving engine's host loop as an input (vLLM V0's per-sequence host time,
# fitted on its two sources), the input embedding out of the weight read, and gpt-fast's batch-1 runs.
# Training fell to 4.8 when runs were priced with the attention kernel they ran (llm-foundry: FlashAttention's
# Triton kernel; OLMo-core, which joined then: PyTorch 2.6's SDPA, FlashAttention-2; shares of peak from the
# FlashAttention-2 and -3 papers, not fitted): their small models no longer pull the Hopper BF16 share down, so
# DGX Cloud's runs left out are predicted from the rest within 15% (source median 6.6%, was 17.5%).
# Training 4.8 -> 5.1 with the fully sharded runs at 128-1,024 GPUs (evidence/zero3_scale.yaml): they kept state
# in host memory, which the step model does not price, so they fit nothing and are predicted 7-24% too fast.
# Collectives 6.2 -> 8.1 with the ABCI A-node sweep (evidence/one_node_sweeps.yaml): one process per A100,
# 32 KiB .. 32 MiB, 19-56% slower than predicted; back to 6.4 with the A100 ring's NVLink hop scale and LL
# share (data/comm_fit.yaml), which also make A100 training's tensor-parallel all-reduces slower: training
# 5.1 -> 5.3, inference 7.0 -> 6.5. Collectives 6.4 -> 5.4 when the A100 LL share bounded the channels
# together rather than each one, and 5.3 when halved threads stopped costing a ring bandwidth; 5.32 with
# ABCI's 4 B .. 16 KiB rows and the A100 hop that grows with the threads at work (5.26 on the 76 entries before).
# Inference 6.5 -> 5.9 with AMD's 2025 small-batch decode rows (evidence/decode_low_latency.yaml).
# Rack-scale evidence (evidence/rack_scale.yaml): training 5.3 -> 5.64 with MLPerf v5.0's GB200 NVL72 LoRA runs,
# which pull the Blackwell FP8 share from 0.465 to 0.445 (the 107 entries before them: 5.29 -> 5.59);
# collectives 5.32 -> 8.54 with CoreWeave's rack and multi-rack all-reduces, 15-59% slower than predicted and
# fitting no constant (the 89 entries before them unchanged at 5.32).
# Collectives also take the six RCCL plateau rows on MI300X/MI325X (evidence/rccl_one_node.yaml), each predicted
# 5-6% fast by the xGMI mesh at RCCL's per-link figure.
# BLOOM-176B on 384 A100 (evidence/a100_megatron_deepspeed.yaml, predicted 3.7% fast left out): training
# 5.64 -> 5.62 (validate, 112 entries); the refit it brings moves the A100 and Hopper shares by 0.005.
# DeepSpeed's 2T run (1,024 GPUs, offloaded, fits nothing; 29% fast): training 5.62 -> 5.64 (113 entries).
# Inference 5.59 -> 5.7 with TensorRT-LLM's six 20000/2000 rows (73 entries), and 4.60 once a prompt's chunks hide
# only the weight reads of the steps that carry them (model/step/infer.py, prefill_chunk_steps).
# Fine-grained MoE: training 5.64 -> 5.55 (112 entries with the H100 Qwen3-235B row).
# Merged round (all of the above together, the MoE fixed times refitted to 200 + 72.5 us per local expert):
# training 5.66 (validate, 114 entries).
# Collectives 7.4 -> 11.98 with ABCI's all-reduces across 2-16 A-nodes (evidence/ib_multi_node.yaml, 20 rows,
# 4 x HDR per node as the system guide states): 12-76% slower than predicted and fitting no constant (the 112
# entries before them unchanged); the same repository's MPI point-to-point runs between two A-nodes reached 39%
# of the nodes' nominal HDR bandwidth (docs/model.md, "Collectives across several InfiniBand nodes"); 9.84 with
# Nebius's 2 x 8 H200 rows at 1-16 GiB (3-8% slower than predicted).
LOSO_MEDIAN_LIMIT_PCT = {"training": 5.7, "collectives": 9.85, "inference": 4.65}
# Training rose from 5.2 with the LoRA entries: they are AMD's only training evidence, so every regime that
# holds them (lora, long-context, memory-edge) is fitted without any CDNA3 training share and predicts the
# MI300X/MI325X runs on the A100's, 36-55% too fast. It rose again (7.1 -> 8.2) when the memory estimate
# stopped over-counting: memory-edge (predicted memory >= 90% of usable) shrank from 36 to 27 entries, the ones
# that left being well predicted ones, so its pairs are now weighted towards those AMD LoRA runs; and to 8.5
# with the moe-training regime, which left out has no MoE fixed time fitted at all.
# Collectives fell from 18.0 to 12.0 with the host floor: the one-thread A100 sweep's small sizes are host-bound;
# to 11.4 with EFA's per-hop cost and the p4d sweep priced Simple-only (as aws-ofi-nccl runs it there).
# Training fell to 5.0 (small-models 14.3 -> 4.0, two sources) with the attention kernels the runs used, and to
# 4.0 with the memory fixes (memory-edge 7.8 -> 4.6: the loss buffers, dropout masks and FP8 activation stores).
# 4.0 -> 4.5 with the fully sharded runs (above), which join the fsdp, memory-edge and 1,000+ GPU regimes.
# Collectives 11.4 -> 30.4 with the ABCI A-node sweep, which joins both small-message regimes; 17.7 with the
# A100 ring constants, which left out with those regimes are fitted on the A100 sweeps' 16 MiB+ rows alone;
# 13.4 when a constant those rows cannot pin (the LL share) keeps its prior instead of the grid's first value;
# 12.1 with that prior NCCL's own A100 LL model up to 2.20 (the versions the A100 sweeps ran), not 2.30's;
# 10.3 when halved threads stopped costing a ring bandwidth (p5.48xlarge's 8 KiB: 18% slow -> 3.7% fast);
# 9.9 when EFA's per-hop cost became a constant of the fit, which the small-message folds no longer fit on the
# regime's own two EFA floors: left out, it keeps its prior (aws-ofi-nccl's tuner, 17.3 us; fitted 17.5).
# 8.9 with ABCI's 4 B .. 16 KiB rows (13 more entries, predicted within 14% left out) and the A100 hop that grows
# with the threads at work; on the 76 entries before them it stays 9.9.
# Rack-scale evidence: training 4.58 -> 5.61 (the GB200 LoRA runs join the rack-scale, LoRA, long-context and
# memory-edge regimes 5-14% fast; the 107 entries before them 4.72), collectives 8.9 -> 11.91 (the rack-scale
# all-reduces, not fitted, miss by a median 30%; the 89 entries before them stay 8.9).
# BLOOM-176B on A100 (2022 Megatron-DeepSpeed): training 5.61 -> 5.35 (validate, 112 entries); 6.05 with
# DeepSpeed's 2T run, 29% fast in each of the four regimes it joins (fsdp-256-gpus, fsdp-multi-node,
# over-1000-gpus, memory-edge). Inference 5.67 -> 5.95 with the 20000/2000 rows: long-prompts (9 -> 15 entries)
# left out is 8.1%, as no other regime holds prompts that long.
# Fine-grained MoE (docs/model.md, "Fine-grained MoE"): training 5.61 -> 6.14 with the MoE fixed time split into a
# part per layer and a part per local expert, fitted together, and the H100 Qwen3-235B row: a regime left out
# refits both on fewer MoE runs, and rack-scale (GB200/GB300's MoE rows among its 10) rose 5.9 -> 9.6.
# Memory-edge runs entered as their recipes ran (NeMo AutoModel's DeepSeek V3 and Qwen3 30B with full
# recomputation, activation_checkpointing: true): training 6.0 -> 6.44 (5.9 with every other change of that round
# and those rows without recomputation); the model prices the two rows 28-34% slower than they ran, an open miss.
# Merged round: training 7.20 — moe-training left out is 22.6% (its four sources refit both MoE fixed times
# without it: the prior) and fsdp-256-gpus 28.5% (DeepSpeed's offloaded runs); validate names both as the worst.
# Collectives 11.9 -> 12.85 with ABCI's A-node all-reduces (small-messages left out: 9.0% -> 12.5%).
LORO_MEDIAN_LIMIT_PCT = {"training": 7.25, "collectives": 12.9, "inference": 6.0}
SMALL_BATCH_DECODE_LORO_LIMIT_PCT = 10.0
"""Decode at batch <= 32 left out of the fit and predicted from the rest (9.8% when set; 15.6% before the host
loop was an input; 6.9% with AMD's 2025 blog's TP 8 rows)."""
LORA_LOSO_MEDIAN_LIMIT_PCT = 15.0
"""The fine-tuning target: median step-time error at most 15% on 8-GPU MLPerf-class LoRA runs."""
SHARE_STEP = float(FINE_SHARE[1] - FINE_SHARE[0])
MIX_STEP = float(FINE_MIX[1] - FINE_MIX[0])
INFER_SHARE_STEP = float(INFER_FINE_SHARE[1] - INFER_FINE_SHARE[0])
INFER_STEP = {"decode_kernel_us": float(INFER_FINE_KERNEL_US[1] - INFER_FINE_KERNEL_US[0]),
              "decode_seq_host_us": float(INFER_FINE_HOST_US[1] - INFER_FINE_HOST_US[0])}


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


@pytest.fixture(scope="module")
def priced_comm() -> PricedCollectives:
    """The collectives priced on their grids (the costly part of a collective fit), as `validate` prices them."""
    return packaged_priced_collectives()


@pytest.fixture(scope="module")
def result() -> Validation:
    # The same object `linkscope validate` prints in this process (tests/cli/test_validate.py).
    return packaged_validation()


def test_every_entry_names_a_known_source_and_resolves(db: HardwareDB) -> None:
    evidence = load_evidence()
    for kind in KINDS:
        entries = evidence.entries(kind)
        assert entries, kind
        assert {e.source for e in entries} <= set(evidence.sources)
    assert sum(1 for e in evidence.training if e.source == CALIBRATION_SOURCE) == 8


def test_a_bad_evidence_file_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "evidence.yaml"
    bad.write_text(EVIDENCE_FILE.read_text(encoding="utf-8").replace("value: 726", "value: -726", 1),
                   encoding="utf-8")
    with pytest.raises(DataError, match="training.0.value"):
        load_evidence(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(EVIDENCE_FILE.read_text(encoding="utf-8").replace(
        "- {source: nemo-perf-24.07,", "- {source: nowhere,", 1), encoding="utf-8")
    with pytest.raises(DataError, match="unknown source 'nowhere'"):
        load_evidence(unknown)


def test_evidence_files_merge_and_a_source_is_listed_once(tmp_path: Path) -> None:
    more = tmp_path / "more.yaml"
    more.write_text("version: 1\nas_of: 2026-12-04\nsources:\n"
                    "  - {id: extra, kind: training, citation: c, url: u, as_of: 2026-01-01}\n"
                    "training:\n  - {source: extra, system: dgx-a100, model: gpt3-20b, gpus: 8, global_batch: 8,"
                    " micro_batch: 1, seq_len: 2048, tp: 8, pp: 1, metric: step_time_s, value: 1.5, where: w}\n",
                    encoding="utf-8")
    merged = read_evidence([EVIDENCE_FILE, more])
    assert len(merged.training) == len(read_evidence([EVIDENCE_FILE]).training) + 1
    assert "extra" in merged.sources
    twice = tmp_path / "twice.yaml"
    twice.write_text(more.read_text(encoding="utf-8").replace("id: extra", "id: nemo-perf-24.07")
                     .replace("source: extra", "source: nemo-perf-24.07"), encoding="utf-8")
    with pytest.raises(DataError, match="'nemo-perf-24.07' is also listed in evidence.yaml"):
        read_evidence([EVIDENCE_FILE, twice])


def test_packaged_constants_are_what_the_fitting_procedure_gives(db: HardwareDB) -> None:
    packaged = packaged_constants()
    fitted = PricedSet(load_evidence(), db, packaged).fit()
    assert fitted.gemm_efficiency_max == pytest.approx(packaged.gemm_efficiency_max, abs=SHARE_STEP)
    for key, share in fitted.gemm_efficiency_by_arch.items():
        assert share == pytest.approx(packaged.gemm_efficiency_by_arch[key], abs=SHARE_STEP), key
    for name in ("zero3_overlap", "tp_comm_overlap"):
        assert getattr(fitted, name) == pytest.approx(getattr(packaged, name), abs=MIX_STEP), name
    assert set(fitted.infer_gemm_efficiency_by_arch) == set(packaged.infer_gemm_efficiency_by_arch)
    for key, share in fitted.infer_gemm_efficiency_by_arch.items():
        assert share == pytest.approx(packaged.infer_gemm_efficiency_by_arch[key], abs=INFER_SHARE_STEP), key
    for name, step in INFER_STEP.items():
        assert getattr(fitted, name) == pytest.approx(getattr(packaged, name), abs=step), name
    assert fitted.reserved_over_allocated == packaged.reserved_over_allocated


def test_packaged_comm_constant_is_what_the_fitting_procedure_gives(priced_comm: PricedCollectives) -> None:
    fitted = priced_comm.fit()
    grids = {"nvls_chunk_overhead_us": OVERHEAD_GRID_US, "nvls_sync_us": SYNC_GRID_US,
             "nccl_call_host_us": HOST_GRID_US, "ampere_nvlink_hop_scale": HOP_SCALE_GRID,
             "ampere_ll_share": LL_SHARE_GRID, "efa_latency_us_extra": EFA_GRID_US}
    for name, grid in grids.items():
        step = float(grid[1] - grid[0])
        assert getattr(fitted, name) == pytest.approx(getattr(packaged_comm_fit(), name), abs=step), name


def test_efa_per_hop_cost_is_fitted_on_two_floors_and_left_out_keeps_its_prior(priced_comm: PricedCollectives) -> None:
    """EFA's per-hop cost is fitted on the two current-stack floors (p5.48xlarge, p6-b200); with the messages
    under 16 MiB left out no row that fits it remains (the p4d sweep ran Simple only), so it keeps its prior,
    aws-ofi-nccl's own tuner figure, not a value fitted on the left-out rows."""
    priced = priced_comm
    assert {e.source for e, on in zip(priced.entries, priced.on_efa) if on} == {
        "aws-k8s-tester-585-p5", "dstack-3961-p6-b200"}
    fold = priced.fit(keep=lambda e: e.size_bytes >= 16 * 2**20)
    prior = packaged_comm_fit().prior_efa_latency_us_extra
    assert fold.efa_latency_us_extra == pytest.approx(prior, abs=float(EFA_GRID_US[1] - EFA_GRID_US[0]) / 2)
    assert EFA_GRID_US[0] < priced.fit().efa_latency_us_extra < EFA_GRID_US[-1]


def test_a100_ring_constants_hold_when_any_a100_source_is_left_out(priced_comm: PricedCollectives) -> None:
    """Each A100 ring constant is fitted on several sources: leaving any one out moves it by a grid step at most,
    and both stay inside their grids (a constant at a grid's edge would be the grid talking, not the data)."""
    priced = priced_comm
    full = priced.fit()
    a100 = {e.source for e, on in zip(priced.entries, priced.on_ampere) if on}
    assert len(a100) >= 2
    for source in a100:
        fold = priced.fit(keep=lambda e, s=source: e.source != s)
        assert abs(fold.ampere_nvlink_hop_scale - full.ampere_nvlink_hop_scale) <= 0.25 + 1e-9, source
        assert abs(fold.ampere_ll_share - full.ampere_ll_share) <= 0.05 + 1e-9, source
    assert HOP_SCALE_GRID[0] < full.ampere_nvlink_hop_scale < HOP_SCALE_GRID[-1]
    assert LL_SHARE_GRID[0] < full.ampere_ll_share < LL_SHARE_GRID[-1]


def test_a_constant_no_kept_entry_pins_keeps_its_prior(priced_comm: PricedCollectives) -> None:
    """With the messages under 16 MiB left out no LL ring between A100s remains, so the LL share keeps its prior
    (not an end of its grid), while the hop scale, which the A100 rows of 16 MiB and more also price, is fitted."""
    priced = priced_comm
    fold = priced.fit(keep=lambda e: e.size_bytes >= 16 * 2**20)
    assert fold.ampere_ll_share == pytest.approx(packaged_comm_fit().prior_ampere_ll_share, abs=0.05)
    assert fold.ampere_nvlink_hop_scale > packaged_comm_fit().prior_ampere_nvlink_hop_scale
    assert fold.nccl_call_host_us == packaged_comm_fit().prior_nccl_call_host_us


def test_loso_errors_do_not_regress(result: Validation) -> None:
    for kind, limit in LOSO_MEDIAN_LIMIT_PCT.items():
        assert result.kinds[kind].loso_median_pct <= limit, kind
    lora = next(r for r in result.regimes if r["regime"] == "lora")
    assert lora["loso_median_pct"] <= LORA_LOSO_MEDIAN_LIMIT_PCT


def test_the_calibration_set_stays_within_three_percent(result: Validation) -> None:
    calibration = next(s for s in result.sources if s["source"] == CALIBRATION_SOURCE)
    assert calibration["in_sample_median_pct"] <= 3.0


def test_a_source_left_out_is_predicted_without_its_own_evidence(result: Validation) -> None:
    # Left out, NIM's entries are predicted with constants fitted on the other serving sources.
    nim = [r for r in result.entries if r.source == "nim-benchmarking-1.0" and "time_per_output" in r.label]
    assert nim and any(abs(r.loso - r.in_sample) > 1e-6 * r.in_sample for r in nim)
    # Collectives: the NVLS chunk overhead is refitted without the source, so the NVLS sweeps move, and so do
    # A100 rings (their hop scale and LL share), and so does the 4090's host-bound row (without it the host time
    # is fitted on OCI's host-bound small rows alone); entries that depend on none of them (two nodes of H100
    # over InfiniBand: NVLS-tree keeps NCCL's model) do not.
    p5 = [r for r in result.entries if r.source == "aws-batch-p5-nccl-tests"]
    assert any(abs(r.loso - r.in_sample) > 1e-6 * r.in_sample for r in p5)
    abci = [r for r in result.entries if r.source == "abci-2.0-anode-nccl-2.8"]
    assert any(abs(r.loso - r.in_sample) > 1e-6 * r.in_sample for r in abci)
    host_bound = [r for r in result.entries if r.source == "nccl-issue-1530-4090"]
    assert host_bound and all(abs(r.loso - r.in_sample) > 1e-6 * r.in_sample for r in host_bound)
    neither = [r for r in result.entries if r.source == "nccl-tests-309"]
    assert neither and all(r.loso == pytest.approx(r.in_sample) for r in neither)


def test_the_packaged_residual_records_are_what_validate_computes(result: Validation) -> None:
    from linkscope.model.ranges.accuracy import accuracy_file

    computed, packaged = range_file(result)["residuals"], accuracy_file().residuals
    assert set(packaged) == set(computed) == set(KINDS)
    for kind in KINDS:
        assert len(packaged[kind]) == len(computed[kind]), kind
        for have, want in zip(packaged[kind], computed[kind]):
            assert (have.source, have.fabric_class, have.family, have.precision, have.mode, have.framework,
                    have.gpus) == (want["source"], want.get("class"), want.get("family"), want.get("precision"),
                                   want.get("mode"), want.get("framework"), want.get("gpus"))
            assert have.loso == pytest.approx(want["loso"], abs=1e-3)
            assert have.loro == pytest.approx(want.get("loro", []), abs=1e-3)


def test_coverage_is_nested_each_entry_judged_by_the_range_made_without_its_source(result: Validation) -> None:
    from linkscope.model.ranges.rule import spread_of

    records = [residual_of(r) for r in result.entries]
    for r in result.entries[::7]:
        without = spread_of(residual_of(r).query, [x for x in records if x.source != r.source])
        assert (r.range_p10_log, r.range_p90_log) == pytest.approx((without.p10_log, without.p90_log))
        assert r.covered == (without.p10_log <= r.time_log_residual <= without.p90_log)
    # Nesting matters: some entry's range differs from the one its own source's records would have helped make.
    with_own = [spread_of(residual_of(r).query, records) for r in result.entries]
    assert any(abs(w.p90_log - (r.range_p90_log or 0.0)) > 1e-6 for w, r in zip(with_own, result.entries))


def test_coverage_and_half_width_per_kind_and_regime(result: Validation) -> None:
    from linkscope.model.fidelity.validate import coverage_pct, half_width_pct, worst_regimes

    # What `linkscope validate` printed when these limits were set (docs/model.md, "How ranges are made"):
    # training 77.5% / 14.9% (a dense run's class holds dense runs only), collectives 76.6% / 27.4% (ABCI's
    # A-node all-reduces, 12-76% slower than predicted, share the InfiniBand class with the H100 and H200 rows of
    # nccl-tests#309 and Nebius), inference 76.7% / 16.5%; a change that makes the ranges hold less often or much
    # wider fails.
    for kind, width in (("training", 17.0), ("collectives", 28.0), ("inference", 18.0)):
        assert 75.0 <= (coverage_pct(result, kind) or 0.0) <= 95.0, kind
        assert 0.0 < (half_width_pct(result, kind) or 0.0) <= width, kind
    for row in result.regimes:
        assert row["coverage_pct"] is not None and 0.0 <= row["coverage_pct"] <= 100.0
        assert row["half_width_pct"] is not None and row["half_width_pct"] > 0.0
    worst = worst_regimes(result)
    training = [r for r in result.regimes if r["kind"] == "training"]
    assert len(worst["training"]["largest_error"]) == 3
    assert worst["training"]["largest_error"][0]["loro_median_pct"] == max(r["loro_median_pct"] for r in training)
    assert worst["training"]["least_coverage"][0]["coverage_pct"] == min(r["coverage_pct"] for r in training)
    assert set(worst) == {r["kind"] for r in result.regimes} and "disaggregated" not in worst


def test_a_selection_keeps_the_ranges_computed_from_every_source(result: Validation) -> None:
    moe = result.selected(kind="moe")
    assert set(moe.kinds) == {"moe"} and all(r.kind == "moe" for r in moe.entries)
    assert [r.range_p90_log for r in moe.entries] == [r.range_p90_log for r in result.entries if r.kind == "moe"]
    assert {r["kind"] for r in moe.regimes} <= {"moe"} and {s["kind"] for s in moe.sources} == {"moe"}
    nothing = result.selected(source="no-such-source")
    assert nothing.entries == [] and nothing.kinds == {} and nothing.as_dict()["worst_regimes"] == {}


def test_moe_dispatch_and_combine_leave_one_source_out_median_within_15_pct(result: Validation) -> None:
    moe = result.kinds["moe"]
    assert moe.n >= 20
    assert moe.loso_median_pct <= 15.0
    sources = {s["source"] for s in result.sources if s["kind"] == "moe"}
    assert {"deepep-v1-legacy", "deepep-v2-readme"} <= sources


def test_inference_entries_need_a_batch_except_at_maximum_load() -> None:
    from linkscope.model.fidelity.evidence import InferenceEntry

    common = {"source": "s", "system": "dgx-h100", "model": "llama3-8b", "tp": 1, "input_tokens": 128,
              "output_tokens": 128, "value": 1.0, "where": "w"}
    assert InferenceEntry(**common, metric="output_tokens_per_s").batch is None
    with pytest.raises(ValueError, match="batch is required for metric batch_latency_s"):
        InferenceEntry(**common, metric="batch_latency_s")


def test_serving_fixed_costs_are_one_physical_value_for_every_vendor(result: Validation) -> None:
    # No per-vendor serving factor: the kernel and host times are fitted on every source together, inside
    # their physical ranges, and the HBM share is measured.
    fitted = result.fitted
    assert INFER_FINE_KERNEL_US[0] <= fitted["decode_kernel_us"] <= INFER_FINE_KERNEL_US[-1]
    assert INFER_FINE_HOST_US[0] <= fitted["decode_seq_host_us"] <= INFER_FINE_HOST_US[-1]
    assert fitted["decode_hbm_measured"] == {"nvidia": pytest.approx(0.83)}
    # The host time per sequence only a serial engine pays rests on at least two independent sources.
    serial = {e.source for e in load_evidence().inference if e.engine == "serial"}
    assert len(serial) >= 2 and fitted["decode_seq_host_us"] > 0


def test_small_batch_decode_is_predicted_with_its_regime_left_out(result: Validation) -> None:
    regime = next(r for r in result.regimes if r["regime"] == "small-batch-decode")
    assert regime["sources"] >= 5
    assert regime["loro_median_pct"] <= SMALL_BATCH_DECODE_LORO_LIMIT_PCT


def test_a_regime_left_out_is_predicted_from_the_others(result: Validation, db: HardwareDB) -> None:
    from linkscope.model.fidelity.regimes import REGIMES
    from linkscope.model.fidelity.validate import loro_err_pct

    by_id = {r["regime"]: r for r in result.regimes}
    assert set(by_id) == {regime.id for regime in REGIMES}
    # Each regime holds entries of its own kind only, and each member carries its LORO prediction.
    for regime in REGIMES:
        members = [r for r in result.entries if regime.id in r.loro]
        assert len(members) == by_id[regime.id]["n"] and {r.kind for r in members} == {regime.kind}
    # ZeRO-3 across nodes left out: zero3_overlap is fitted on one-node ZeRO-3 runs alone, so they move.
    fsdp = [r for r in result.entries if "fsdp-multi-node" in r.loro]
    assert any(abs(r.loro["fsdp-multi-node"] - r.in_sample) > 1e-6 * r.in_sample for r in fsdp)
    # The LoRA regime is the fine-tunes, and only them.
    assert {r.label for r in result.entries if "lora" in r.loro} == {r.label for r in result.entries
                                                                     if " LoRA r" in r.label}
    for kind, limit in LORO_MEDIAN_LIMIT_PCT.items():
        errs = [abs(loro_err_pct(r, k)) for r in result.entries if r.kind == kind for k in r.loro]
        assert max(errs) >= result.loro_median_pct(kind) >= min(errs)
        assert result.loro_median_pct(kind) <= limit, kind


def test_moe_training_entries_form_their_regime_and_fit_the_moe_fixed_time(result: Validation,
                                                                          db: HardwareDB) -> None:
    from linkscope.model.comm.moe import moe_constants
    from linkscope.model.fidelity.moe_fit import FINE_EXPERT_US, FINE_OVERHEAD_US, PRIOR_OVERHEAD_US, \
        PricedMoeTraining, moe_training_entries

    entries = moe_training_entries(load_evidence())
    assert len({e.source for e in entries}) >= 2 and all(e.ep > 1 for e in entries)
    members = {r.label for r in result.entries if "moe-training" in r.loro}
    assert members == {f"{e.model} on {e.gpus} x {e.system}" for e in entries}
    # The packaged fixed times are what the fitting procedure gives on every source.
    priced = PricedMoeTraining(entries, db)
    layer_us, expert_us = priced.fit()
    assert layer_us == pytest.approx(moe_constants().moe_layer_overhead_us,
                                     abs=float(FINE_OVERHEAD_US[1] - FINE_OVERHEAD_US[0]))
    assert expert_us == pytest.approx(moe_constants().moe_expert_overhead_us,
                                      abs=float(FINE_EXPERT_US[1] - FINE_EXPERT_US[0]))
    # Left out as a regime, nothing fits it: the prior.
    assert priced.fit(keep=lambda e: False) == PRIOR_OVERHEAD_US


SMALL_MODELS_LORO_LIMIT_PCT = 4.5
"""`validate`'s small-models LORO median when it was set (4.0%; 14.3% over one source before the runs were
priced with the attention kernels they ran); 4.4% once A100 rings took the fitted hop scale and LL share."""


def test_small_models_are_predicted_from_the_larger_ones_across_two_sources(result: Validation) -> None:
    small = next(r for r in result.regimes if r["regime"] == "small-models")
    assert small["sources"] >= 2 and small["loro_median_pct"] <= SMALL_MODELS_LORO_LIMIT_PCT
    # The runs state their attention kernel: llm-foundry's MPT sweeps ran FlashAttention's Triton kernel,
    # OLMo-core's PyTorch 2.6 SDPA ran FlashAttention-2.
    evidence = load_evidence()
    kernels = {(e.source, e.attention) for e in evidence.training
               if e.source in ("llm-foundry-benchmarks", "olmo-core-readme-2025-03")}
    assert kernels == {("llm-foundry-benchmarks", "triton"), ("olmo-core-readme-2025-03", "flash2")}


def test_disaggregated_kv_transfers_within_20_pct_median_and_every_verdict_right(result: Validation) -> None:
    from linkscope.model.fidelity.validate import verdicts

    kv = [abs(r.loso_err_pct) for r in result.entries if r.kind == "disaggregated" and r.metric == "kv_gb_per_s"]
    assert kv and sorted(kv)[len(kv) // 2] <= 20.0
    counts = verdicts(result)
    assert counts["n"] >= 3 and counts["right"] == counts["n"]


MEMORY_MEDIAN_LIMIT_PCT = 4.5
"""Predicted peak memory per GPU against published figures: 12.6% while the model's need was compared with
reserved peaks as it was, 4.4% with the reserved-over-allocated ratio fitted (each source predicted with the ratio
the other one gives)."""


def test_memory_is_a_kind_of_its_own_its_reserved_ratio_fitted_without_the_source_left_out(
        result: Validation, db: HardwareDB) -> None:
    memory = [r for r in result.entries if r.kind == "memory"]
    evidence = load_evidence()
    assert len(memory) == len(evidence.memory) >= 10
    assert result.kinds["memory"].loso_median_pct <= MEMORY_MEDIAN_LIMIT_PCT
    # The published figures are what the allocator reserved; what the tensors need sits below each of them, and
    # the ratio fitted without a source is the one its entries are predicted with.
    assert all(e.figure == "reserved" for e in evidence.memory)
    assert all(allocated_memory_gib(e) < e.value for e in evidence.memory)
    priced = PricedSet(evidence, db, packaged_constants())
    for source in {e.source for e in evidence.memory}:
        ratio = priced.fit(keep=lambda e, s=source: e.source != s).reserved_over_allocated
        for entry, r in zip(evidence.memory, memory):
            if entry.source == source:
                assert r.loso == pytest.approx(allocated_memory_gib(entry) * ratio), r.label
    assert {g["regime"] for g in result.regimes if g["kind"] == "memory"} == {"memory-pipelined",
                                                                             "memory-long-context"}


def test_the_packaged_validation_is_kept_between_starts_under_its_files_and_code(
        result: Validation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second `linkscope validate` reads what the first computed, keyed by every packaged data file and every
    linkscope source file (edit either and it is computed again)."""
    monkeypatch.setenv("LINKSCOPE_CACHE_DIR", str(tmp_path))
    builds: list[int] = []

    def build() -> Validation:
        builds.append(1)
        return result

    first, again = stored_validation(build), stored_validation(build)
    assert builds == [1] and again is not first and again.as_dict(with_entries=True) == result.as_dict(True)
    files, sources = validation_inputs()
    assert EVIDENCE_FILE in files and any(f.name == "compute.yaml" for f in files)
    assert any(f.name == "validate.py" for f in sources) and any(f.name == "collectives.py" for f in sources)
    monkeypatch.setenv("LINKSCOPE_CACHE_DIR", "")
    stored_validation(build)
    assert builds == [1, 1]
