"""The rack-scale evidence (GB200 NVL72): how its entries are priced and what they fit."""

from __future__ import annotations

import pytest

from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.model.fidelity.comm_fit import PricedCollectives
from linkscope.model.fidelity.evidence import CollectiveEntry, load_evidence
from linkscope.model.fidelity.evidence_predict import across_trays, predicted
from linkscope.model.fidelity.regimes import REGIMES


@pytest.fixture(scope="module")
def db() -> HardwareDB:
    return load_db(include_user=False)


def _entry(gpus: int, nvls: bool = True) -> CollectiveEntry:
    return CollectiveEntry(source="s", system="gb200-nvl72", op="all_reduce", gpus=gpus, size_bytes=1 << 30,
                           metric="time_us", value=3000.0, where="w", nvls=nvls)


def test_a_run_with_nvls_off_is_priced_without_it(db: HardwareDB) -> None:
    # NCCL_NVLS_ENABLE=0 on a rack: NCCL's ring over NVLink is slower than NVLink SHARP.
    assert predicted(_entry(72, nvls=False), db) > 1.3 * predicted(_entry(72), db)


def test_only_entries_across_trays_belong_to_the_rack_scale_regimes(db: HardwareDB) -> None:
    assert across_trays(_entry(8), db) and across_trays(_entry(144), db)
    tray = CollectiveEntry(source="s", system="gb200-nvl72", op="all_reduce", gpus=4, size_bytes=1 << 30,
                           metric="time_us", value=100.0, where="w")
    h100 = CollectiveEntry(source="s", system="dgx-h100", op="all_reduce", gpus=16, size_bytes=1 << 30,
                           metric="time_us", value=100.0, where="w")
    assert not across_trays(tray, db) and not across_trays(h100, db)
    regime = next(r for r in REGIMES if r.id == "rack-scale-collectives")
    assert regime.member(_entry(72), db) and not regime.member(h100, db)


def test_collectives_across_trays_fit_no_constant(db: HardwareDB) -> None:
    evidence = load_evidence()
    rack = [e for e in evidence.collectives if across_trays(e, db)]
    others = [e for e in evidence.collectives if not across_trays(e, db)][:6]
    assert {e.source for e in rack} >= {"coreweave-nccl-tests-gb200", "coreweave-nccl-tests-gb200-20racks"}
    priced = PricedCollectives(rack[:3] + others, db)
    assert list(priced.fits) == [False] * 3 + [True] * len(others)
    # Fitted on the rack's entries alone, every constant keeps its prior.
    alone = priced.fit(keep=lambda e: e in rack)
    assert alone == PricedCollectives([], db).fit()
