"""The memory kind of the evidence set: published peak memory per GPU with its configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import load_db
from linkscope.model.fidelity.evidence import EVIDENCE_DIR, MemoryEntry, load_evidence, read_evidence
from linkscope.model.fidelity.evidence_predict import allocated_memory_gib, predicted, predicted_memory_gib
from linkscope.model.fidelity.evidence import kind_of
from linkscope.model.fidelity.validate import label_of
from linkscope.model.step.job import Job
from linkscope.model.step.compute import packaged_constants
from linkscope.model.step.layout import single_layout
from linkscope.model.step.memory import memory_gib_per_gpu
from linkscope.model.step.transformer import model_presets

MEMORY_FILE = EVIDENCE_DIR / "memory.yaml"


def test_memory_entries_load_with_their_source_and_figure() -> None:
    evidence = load_evidence()
    assert len(evidence.memory) >= 10 and evidence.entries("memory") == evidence.memory
    for e in evidence.memory:
        assert evidence.sources[e.source].kind == "memory"
        assert e.figure in ("reserved", "allocated") and e.dp >= 1
        assert e.gpus == e.tp * e.pp * e.cp * e.dp
        assert kind_of(e) == "memory" and e.model in label_of(e)


def test_a_memory_entry_is_predicted_on_its_exact_layout() -> None:
    # torchtitan's Table 5 interleaved row: 405B, TP 8 x PP 8 x FSDP 8, two stages per rank, micro-batches of 4.
    entry = next(e for e in load_evidence().memory if e.interleave == 2)
    job = Job(model=model_presets()["llama3.1-405b"], global_batch=256, seq_len=8192, precision="fp8",
              framework="fsdp")
    lay = single_layout(tp=8, pp=8, dp=8, v=2, mb=4, zero=3, recompute="full", sp=True)
    needed = float(memory_gib_per_gpu(job, None, lay)[0])
    assert allocated_memory_gib(entry) == pytest.approx(needed)
    # torchtitan logs the allocator's peak reserved bytes: the figure compared is the tensors' need times the
    # fitted reserved-over-allocated ratio; an allocated figure is compared with the need itself.
    ratio = packaged_constants().reserved_over_allocated
    assert 1.0 < ratio < 1.5
    assert predicted_memory_gib(entry) == pytest.approx(needed * ratio)
    assert predicted_memory_gib(entry.model_copy(update={"figure": "allocated"})) == pytest.approx(needed)
    assert predicted(entry, load_db(include_user=False)) == predicted_memory_gib(entry)


def test_a_memory_entry_without_its_figure_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "memory.yaml"
    bad.write_text(MEMORY_FILE.read_text(encoding="utf-8").replace(" figure: reserved,", "", 1), encoding="utf-8")
    with pytest.raises(DataError, match="memory.0.figure"):
        read_evidence([bad])
    assert all(isinstance(e, MemoryEntry) for e in read_evidence([MEMORY_FILE]).memory)
