"""MoE on every transport: kernels by name, `auto` following the System, refusals, and each transport's
predictions against its evidence rows (model/data/evidence/moe_transports.yaml, evidence.yaml's DeepEP rows)."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest
from pydantic import ValidationError

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.hardware.moe_transports import MoeTransportFile, moe_transport_facts
from linkscope.model.calibration.systems import resolve
from linkscope.model.comm.moe import MoeRequest, predict_moe
from linkscope.model.comm.tiers import CommTiers
from linkscope.model.fidelity.evidence import MoeEntry, load_evidence
from linkscope.model.fidelity.evidence_predict import measured, moe_transport, predicted

DECODE = dict(tokens_per_rank=128, hidden=7168, topk=8, experts=288)


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db([])


def _tiers(db: HardwareDB, system: str, ep: int) -> CommTiers:
    return resolve(system, db, ep, None).tiers


def _errors(db: HardwareDB, transport: str, kernels: tuple[str, ...]) -> list[float]:
    rows = [e for e in load_evidence().moe if e.kernel in kernels and moe_transport(e, db) == transport]
    assert rows, transport
    return [predicted(e, db) / measured(e) - 1 for e in rows]


@pytest.mark.parametrize(("transport", "kernels"), [
    ("ibgda", ("low-latency", "deepep-ll")),
    ("proxy", ("uccl-ep-ll",)),
    ("efa", ("uccl-ep-ll",)),
    # One node: DeepEP's normal kernels (V1 on H800, V2 on B200) and V1's EP 8 low-latency rows.
    ("nvlink", ("normal", "low-latency")),
])
def test_kernels_match_their_transport_evidence(db: HardwareDB, transport: str,
                                                             kernels: tuple[str, ...]) -> None:
    errors = _errors(db, transport, kernels)
    assert statistics.median(abs(e) for e in errors) <= 0.15, errors
    assert max(abs(e) for e in errors) <= 0.3, errors


def test_the_same_decode_dispatch_is_slowest_on_efa_and_fastest_on_nvlink(db: HardwareDB) -> None:
    # UCCL-EP's tables: EFA (p5en, EP 16) 226 us, CX7 through a proxy (MI300X) 136 us; DeepEP over IBGDA on
    # H800 at EP 16 118 us. The same request on H100 nodes: nvlink (one node) < ibgda < proxy, and efa above.
    h100 = _tiers(db, "dgx-h100", 16)
    one = predict_moe(_tiers(db, "dgx-h100", 8), MoeRequest(ep=8, kernel="deepep-ll", **DECODE))
    ibgda = predict_moe(h100, MoeRequest(ep=16, kernel="deepep-ll", transport="ibgda", **DECODE))
    proxy = predict_moe(h100, MoeRequest(ep=16, kernel="deepep-ll", transport="proxy", **DECODE))
    efa = predict_moe(_tiers(db, "aws/p5en.48xlarge", 16), MoeRequest(ep=16, kernel="uccl-ep-ll", **DECODE))
    assert one.dispatch_us < ibgda.dispatch_us < proxy.dispatch_us < efa.dispatch_us
    assert ibgda.peer_us == 0 and proxy.peer_us > 0 and efa.peer_us > proxy.peer_us
    # The per-peer cost grows with the remote peers: EFA's time beyond the bytes triples from EP 16 to EP 32.
    efa32 = predict_moe(_tiers(db, "aws/p5en.48xlarge", 32), MoeRequest(ep=32, kernel="uccl-ep-ll", **DECODE))
    assert efa32.peer_us == pytest.approx(3 * efa.peer_us)


@pytest.mark.parametrize(("system", "ep", "kernel", "expected"), [
    ("dgx-h100", 16, "deepep-ll", "ibgda"),
    ("dgx-h100", 8, "deepep-ll", "nvlink"),
    ("dgx-h100", 16, "nccl", "proxy"),
    ("dgx-h100", 16, "uccl-ep-ll", "proxy"),
    ("aws/p5en.48xlarge", 16, "uccl-ep-ll", "efa"),
    ("aws/p5en.48xlarge", 16, "nccl", "efa"),
])
def test_auto_follows_the_system_and_the_kernel(db: HardwareDB, system: str, ep: int, kernel: str,
                                                expected: str) -> None:
    p = predict_moe(_tiers(db, system, ep), MoeRequest(ep=ep, kernel=kernel, **DECODE))
    assert p.transport == expected
    assert p.transport_reason.startswith("auto")


def test_a_system_that_names_a_proxy_transport_gets_proxy(db: HardwareDB) -> None:
    tiers = replace(_tiers(db, "dgx-h100", 16), net_transport="ibrc")
    p = predict_moe(tiers, MoeRequest(ep=16, kernel="deepep-ll", **DECODE))
    assert p.transport == "proxy" and "ibrc" in p.transport_reason


def test_old_kernel_names_are_aliases(db: HardwareDB) -> None:
    tiers = _tiers(db, "dgx-h100", 16)
    for alias, name in (("low-latency", "deepep-ll"), ("normal", "deepep-normal")):
        old = predict_moe(tiers, MoeRequest(ep=16, kernel=alias, **DECODE))
        new = predict_moe(tiers, MoeRequest(ep=16, kernel=name, **DECODE))
        assert old.kernel == name
        assert old.dispatch_us == new.dispatch_us and old.combine_us == new.combine_us


@pytest.mark.parametrize(("system", "ep", "kernel", "transport", "words"), [
    ("aws/p5en.48xlarge", 16, "deepep-ll", "auto", "EFA has no IBGDA"),
    ("dgx-h100", 16, "deepep-ll", "efa", "--transport efa runs over efa; dgx-h100's fabric is infiniband"),
    ("gcp/a3-highgpu-8g", 16, "deepep-ll", "ibgda", "--transport ibgda runs over infiniband or roce"),
    ("gcp/a3-highgpu-8g", 16, "deepep-ll", "auto", "needs GPUDirect RDMA across nodes"),
    ("dgx-h100", 16, "deepep-ll", "nvlink", "stays inside one node"),
    ("dgx-h100", 16, "uccl-ep-ll", "ibgda", "CPU proxy threads"),
    ("dgx-h100", 16, "nccl", "ibgda", "host proxy thread"),
    ("dgx-h100", 16, "deepep-ll", "rdma", "--transport must be one of"),
])
def test_what_cannot_run_is_refused_naming_why(db: HardwareDB, system: str, ep: int, kernel: str, transport: str,
                                              words: str) -> None:
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(")", r"\)")):
        predict_moe(_tiers(db, system, ep), MoeRequest(ep=ep, kernel=kernel, transport=transport, **DECODE))


def test_the_transport_file_is_validated() -> None:
    raw = moe_transport_facts().model_dump()
    raw["kernels"]["nccl"]["transports"] = ["ibgda", "rdma"]
    with pytest.raises(ValidationError, match="unknown transport 'rdma'"):
        MoeTransportFile.model_validate(raw)
    raw = moe_transport_facts().model_dump()
    raw["kernels"]["pplx"]["aliases"] = ["normal"]
    with pytest.raises(ValidationError, match="'normal' is given twice"):
        MoeTransportFile.model_validate(raw)


def test_an_evidence_row_must_name_a_known_kernel() -> None:
    row = load_evidence().moe[0].model_dump()
    row["kernel"] = "deepep-fast"
    with pytest.raises(ValidationError, match="kernel 'deepep-fast'"):
        MoeEntry.model_validate(row)
    row["kernel"], row["transport"] = "deepep-ll", "rdma"
    with pytest.raises(ValidationError, match="transport 'rdma'"):
        MoeEntry.model_validate(row)
