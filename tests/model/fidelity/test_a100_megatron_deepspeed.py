"""A100 full training on 2022 software (data/evidence/a100_megatron_deepspeed.yaml): BLOOM-176B."""

from __future__ import annotations

import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.fidelity.evidence import EVIDENCE_DIR, load_evidence
from linkscope.model.fidelity.evidence_predict import evidence_system, predicted_step_time_s
from linkscope.model.step.transformer import model_presets

SOURCE = "bigscience-bloom-176b"


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def test_the_file_is_merged_with_its_source_and_configuration() -> None:
    assert (EVIDENCE_DIR / "a100_megatron_deepspeed.yaml").is_file()
    evidence = load_evidence()
    source = evidence.sources[SOURCE]
    assert source.url.startswith("https://github.com/bigscience-workshop/bigscience/")
    (entry,) = [e for e in evidence.training if e.source == SOURCE]
    # The README's layout: TP 4 x PP 12 x DP 8 = 384 GPUs, micro-batch 2, global batch 2048 of 2048 tokens.
    assert (entry.tp, entry.pp, entry.dp, entry.gpus) == (4, 12, 8, 384)
    assert (entry.micro_batch, entry.global_batch, entry.seq_len) == (2, 2048, 2048)
    assert entry.precision == "bf16" and entry.recompute == "full" and entry.zero == 1
    assert entry.sequence_parallel is False and entry.attention == "unfused"
    assert entry.step_time_s == pytest.approx(104.70)
    assert entry.assumed


def test_the_log_lines_tflops_follow_from_the_step_time() -> None:
    # The log's 149.77 TFLOPs per GPU is 96 B s l h^2 (1 + s/6h + V/16lh) over the step and the 384 GPUs,
    # the Megatron-DeepSpeed formula that counts the recomputed forward ("4*2 coefficient").
    m = model_presets()["bloom-176b"]
    batch, seq = 2048, 2048
    flops = 96 * batch * seq * m.layers * m.hidden ** 2 * (1 + seq / (6 * m.hidden)
                                                           + m.vocab / (16 * m.layers * m.hidden))
    assert flops / (104.70 * 384) / 1e12 == pytest.approx(149.77, rel=0.01)


def test_the_preset_is_the_readmes_176b_shape() -> None:
    m = model_presets()["bloom-176b"]
    assert (m.layers, m.hidden, m.heads, m.vocab) == (70, 14336, 112, 250880)
    # The README's sanity check: 176B parameters.
    assert 175e9 < m.layers * 12 * m.hidden ** 2 + m.vocab * m.hidden < 177e9


def test_the_jean_zay_partition_has_four_100g_links_per_node(db: HardwareDB) -> None:
    system = evidence_system("evidence:jean-zay-a100", db)
    assert system.node.gpu.family == "A100" and system.node.gpus == 8
    assert system.node.scale_out.nics == 4 and system.node.scale_out.nic_gbit_per_s == 100


def test_bloom_is_predicted_within_ten_percent(db: HardwareDB) -> None:
    (entry,) = [e for e in load_evidence().training if e.source == SOURCE]
    assert predicted_step_time_s(entry, db) == pytest.approx(entry.step_time_s, rel=0.10)
