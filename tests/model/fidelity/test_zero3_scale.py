"""The fully sharded evidence at 128-1,024 GPUs (data/evidence/zero3_scale.yaml) and its regime."""

from __future__ import annotations

import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.fidelity.evidence import EVIDENCE_DIR, TrainingEntry, load_evidence
from linkscope.model.fidelity.evidence_predict import predicted_step_time_s
from linkscope.model.fidelity.regimes import FSDP_SCALE_GPUS, REGIMES

SOURCES = {"pytorch-fsdp-blog-2022", "deepspeed-azure-2022"}


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _entries() -> list[TrainingEntry]:
    return [e for e in load_evidence().training if e.source in SOURCES]


def test_the_file_is_merged_and_names_each_runs_framework() -> None:
    assert (EVIDENCE_DIR / "zero3_scale.yaml").is_file()
    entries = _entries()
    assert {e.source for e in entries} == SOURCES
    assert all(e.zero == 3 and e.tp == e.pp == 1 and e.dp == e.gpus for e in entries)
    assert {e.framework for e in entries if e.source == "deepspeed-azure-2022"} == {"deepspeed"}
    assert {e.framework for e in entries if e.source == "pytorch-fsdp-blog-2022"} == {"fsdp"}
    # Entries elsewhere keep the default (the stack follows the ZeRO stage), but for BLOOM-176B and BigScience's
    # benchmarks before it, which ran on DeepSpeed's engine with ZeRO-1 (evidence/a100_megatron_deepspeed.yaml,
    # evidence/bloom_family_a100.yaml).
    named = SOURCES | {"bigscience-bloom-176b", "bigscience-bloom-prequel-a100"}
    assert {e.framework for e in load_evidence().training if e.source not in named} == {"auto"}


def test_the_tflops_figures_become_tokens_with_the_formula_the_post_states() -> None:
    # 204.49 TFLOP/s per GPU, GPT-3 175B at sequence 512: 96 l h^2 (1 + s/6h + V/16lh) FLOPs per token.
    layers, hidden, seq, vocab = 96, 12288, 512, 51200
    per_token = 96 * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
    entry = next(e for e in _entries() if e.gpus == 256)
    assert entry.value == pytest.approx(204.49e12 / per_token, rel=1e-4)


def test_the_2t_run_is_the_posts_157_tflops_at_its_table_2_shape() -> None:
    # 157 TFLOP/s per GPU on 1,024 GPUs, batch 8 per GPU, sequence 1,024; Table 2: 160 layers, hidden 32,768.
    layers, hidden, seq, vocab = 160, 32768, 1024, 51200
    per_token = 96 * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
    entry = next(e for e in _entries() if e.model == "deepspeed-2t")
    assert (entry.gpus, entry.micro_batch, entry.seq_len) == (1024, 8, 1024)
    assert entry.value == pytest.approx(157e12 / per_token, rel=1e-4)


def test_the_framework_an_entry_names_is_the_one_it_is_priced_with(db: HardwareDB) -> None:
    # DeepSpeed gathers matrix by matrix: at 1,024 ranks each of the four pays the ring's latency, so the same
    # run priced as FSDP (one gather per layer) is faster.
    deepspeed = next(e for e in _entries() if e.gpus == 1024)
    as_fsdp = TrainingEntry.model_validate({**deepspeed.model_dump(), "framework": "fsdp"})
    assert predicted_step_time_s(deepspeed, db) > predicted_step_time_s(as_fsdp, db)


def test_fully_sharded_jobs_from_256_gpus_form_a_regime(db: HardwareDB) -> None:
    regime = next(r for r in REGIMES if r.id == "fsdp-256-gpus")
    members = [e for e in load_evidence().training if regime.member(e, db)]
    assert {e.gpus for e in members if e.source in SOURCES} == {256, 1024}
    assert all(e.zero >= 3 and e.dp > 1 and e.gpus >= FSDP_SCALE_GPUS for e in members)
    # The 128-GPU FSDP run is multi-node fully sharded, not at scale.
    multi_node = next(r for r in REGIMES if r.id == "fsdp-multi-node")
    small = next(e for e in _entries() if e.gpus == 128)
    assert multi_node.member(small, db) and not regime.member(small, db)


def _dp_only_zero3_step_s(db: HardwareDB, gpus: int, global_batch: int) -> float:
    """GPT-3 175B, DeepSpeed ZeRO-3 over every GPU (no TP or PP), fp16, full recomputation, on the Azure VMs of
    the DeepSpeed post: the configuration of 2021-2022 data-parallel-only ZeRO-3 at scale."""
    base = next(e for e in _entries() if e.gpus == 256)
    entry = TrainingEntry.model_validate({**base.model_dump(), "gpus": gpus, "global_batch": global_batch,
                                          "micro_batch": max(1, global_batch // gpus), "seq_len": 2048,
                                          "offload": "none"})
    return predicted_step_time_s(entry, db)


def test_zero3_step_does_not_fall_as_one_over_the_gpu_count(db: HardwareDB) -> None:
    # At a fixed global batch, four times the GPUs give each a quarter of the micro-batches, but every
    # micro-batch still gathers and reduce-scatters the whole model matrix by matrix, and each of those
    # collectives pays the ring's latency over all ranks: the step shrinks by well under 4x.
    at_256 = _dp_only_zero3_step_s(db, 256, 1536)
    at_1024 = _dp_only_zero3_step_s(db, 1024, 1536)
    assert at_1024 < at_256
    assert at_1024 > 1.3 * at_256 / 4
    # One micro-batch of 1 per GPU: the same work per GPU costs more at 1,024 ranks than at 256.
    assert _dp_only_zero3_step_s(db, 1024, 1024) > 1.1 * _dp_only_zero3_step_s(db, 256, 256)
