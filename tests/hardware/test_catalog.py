"""The offering catalog: size, filters that combine, sorting, and the JSON/CSV shapes users script against."""

from __future__ import annotations

import csv
import io
import json

import pytest

from linkscope.hardware.catalog import OfferingFilter, filter_offerings, sort_offerings
from linkscope.hardware.loader import load_db
from tests.cli.helpers import run_cli

JSON_KEYS = {"id", "provider", "instance", "gpu", "gpus", "scale_up", "scale_out", "price_per_hour",
             "price_per_gpu_hour", "price_as_of", "source"}


@pytest.fixture(scope="module")
def db():
    return load_db(include_user=False)


def _json_rows(*args: str) -> list[dict]:
    result = run_cli("catalog", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_catalog_is_broad(db) -> None:
    assert len(db.offerings) >= 100
    assert len({o.provider for o in db.offerings.values()}) >= 15
    sizes = {o.system.node.gpus for o in db.offerings.values()}
    assert {1, 2, 4, 8} <= sizes  # inference/dev sizes as well as whole nodes
    gpus = {o.system.node.gpu.id for o in db.offerings.values()}
    assert {"MI300X", "GB300", "B300-SXM-288GB"} <= gpus
    assert {"crusoe", "digitalocean", "vultr", "verda"} <= {o.provider for o in db.offerings.values()}


def test_nvlink_and_ib_filters_combine() -> None:
    rows = _json_rows("--nvlink", "--ib")
    assert rows
    for row in rows:
        assert row["scale_up"]["kind"] in ("nvswitch", "nvlink-mesh", "nvlink-bridge")
        assert row["scale_out"]["fabric"] == "infiniband"
    everything = _json_rows()
    assert len(rows) < len(everything)
    assert any(r["scale_out"]["fabric"] == "efa" for r in everything)


def test_json_rows_carry_the_documented_keys() -> None:
    for row in _json_rows():
        assert set(row) >= JSON_KEYS, JSON_KEYS - set(row)
        assert {"kind", "bw_gb_per_s"} <= set(row["scale_up"])
        assert {"fabric", "nics", "nic_gbit_per_s", "gpudirect_rdma"} <= set(row["scale_out"])
        assert row["id"] == f"{row['provider']}/{row['instance']}"
        if row["price_per_hour"] is not None:
            assert row["price_per_gpu_hour"] == pytest.approx(row["price_per_hour"] / row["gpus"], abs=1e-3)
            assert row["price_as_of"]


def test_many_filters_at_once(db) -> None:
    rows = _json_rows("--gpu", "H100", "--rdma", "--min-gpus", "8", "--max-price-per-gpu-hour", "15",
                      "--min-scale-out-gbit", "1600", "--multi-node")
    for row in rows:
        assert row["gpu"].startswith("H100")
        assert row["scale_out"]["gpudirect_rdma"] and row["scale_out"]["fabric"] in ("infiniband", "roce", "efa")
        assert row["gpus"] >= 8 and row["price_per_gpu_hour"] <= 15
        assert row["scale_out"]["total_gbit_per_s"] >= 1600 and row["multi_node"] is True


@pytest.mark.parametrize("fabric", ["infiniband", "roce", "efa", "tcp"])
def test_fabric_filter(fabric: str) -> None:
    rows = _json_rows("--fabric", fabric)
    assert rows, f"the catalog should hold at least one {fabric} offering"
    assert {r["scale_out"]["fabric"] for r in rows} == {fabric}


def test_provider_and_nvswitch_filters(db) -> None:
    rows = filter_offerings(db.offerings.values(), OfferingFilter(provider="aws,azure", nvswitch=True), db)
    assert rows and {o.provider for o in rows} <= {"aws", "azure"}
    assert all(o.system.node.scale_up.kind == "nvswitch" for o in rows)


def test_sort_by_price_puts_unknown_prices_last(db) -> None:
    ordered = sort_offerings(list(db.offerings.values()), "price-per-gpu")
    prices = [o.price_per_gpu_hour for o in ordered]
    known = [p for p in prices if p is not None]
    assert known == sorted(known)
    assert prices[: len(known)] == known
    by_scale_out = sort_offerings(list(db.offerings.values()), "scale-out")
    totals = [o.system.node.scale_out.total_gbit_per_s for o in by_scale_out]
    known_totals = [t for t in totals if t is not None]
    assert known_totals == sorted(known_totals, reverse=True)


def test_csv_output_has_one_line_per_offering() -> None:
    result = run_cli("catalog", "--csv", "--ib")
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows and all(r["scale_out_fabric"] == "infiniband" for r in rows)
    assert "nic_gbit_per_s" in rows[0] and "price_per_gpu_hour" in rows[0]


def test_table_says_unknown_for_missing_prices(db) -> None:
    unpriced = [o for o in db.offerings.values() if o.price_per_hour is None]
    assert unpriced, "the catalog should keep offerings whose price is unknown"
    result = run_cli("catalog", "--provider", unpriced[0].provider)
    assert result.exit_code == 0
    assert "unknown" in result.stdout


def test_no_match_is_not_an_error() -> None:
    result = run_cli("catalog", "--gpu", "L4", "--nvswitch")
    assert result.exit_code == 0
    assert "No offering matches" in result.stdout


@pytest.mark.parametrize("family", ["A100", "H100", "H200", "B200", "MI300X"])
def test_a_family_matches_every_variant_of_it(db, family: str) -> None:
    # Computed from the data, not from the filter: every offering whose GPU belongs to the family, and no other.
    wanted = {o.id for o in db.offerings.values() if o.system.node.gpu.family_name == family}
    assert {r["id"] for r in _json_rows("--gpu", family)} == wanted
    assert {r["id"] for r in _json_rows("--gpu", family.lower())} == wanted


def test_the_families_span_their_variants(db) -> None:
    # The bug this guards against: `A100` resolved as the alias of one board matched 7 of the 34 A100 offerings.
    variants = {f: {o.system.node.gpu.id for o in db.offerings.values() if o.system.node.gpu.family_name == f}
                for f in ("A100", "H100", "H200", "B200")}
    assert {"A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIe-80GB"} <= variants["A100"]
    assert {"H100-SXM5-80GB", "H100-PCIe-80GB"} <= variants["H100"]
    assert {"B200-SXM-180GB", "GB200"} <= variants["B200"]
    assert db.gpu("A100") is not None and db.gpu("A100").id == "A100-SXM4-40GB"  # a System file's `gpu: A100`


@pytest.mark.parametrize("exact", ["A100-SXM4-80GB", "H100-PCIe-80GB", "A100-80GB"])
def test_an_exact_id_or_alias_matches_one_gpu(db, exact: str) -> None:
    rows = _json_rows("--gpu", exact)
    assert rows and {r["gpu"] for r in rows} == {db.gpu(exact).id}


def test_gpu_help_names_families_that_exist(db) -> None:
    from linkscope.cli.options import GPU_FAMILIES_IN_HELP

    assert set(GPU_FAMILIES_IN_HELP) <= set(db.family_names())
    text = run_cli("catalog", "--help").stdout
    assert "A100-SXM4-80GB" in text and "every variant" in text


def test_nvl72_racks_and_bridged_pcie_cards_are_modelled_as_sold(db) -> None:
    # CoreWeave sells NVL72 racks whole: a node is one instance of 4 GPUs (a compute tray), 18 of which share one
    # 72-GPU NVLink domain; gb300-4x on InfiniBand, gb300-4x-e on RoCE.
    for instance, fabric in (("gb200-4x", "infiniband"), ("gb300-4x", "infiniband"), ("gb300-4x-e", "roce")):
        offering = db.offerings[f"coreweave/{instance}"]
        node = offering.system.node
        assert (node.gpus, node.scale_up.domain_size, node.scale_out.fabric) == (4, 72, fabric)
        assert offering.books_whole_domain is True and offering.system.nodes_per_domain == 18
    assert db.offerings["coreweave/gb200-4x"].price_per_hour == 42.0  # $42.00/h per instance, as sold
    # An NVLink bridge joins two H100 PCIe cards at 300 GB/s per direction (the SXM NVLink 4 rate is 450).
    for offering in ("hyperstack/H100x8-NVLINK", "latitude/H100x8-NVLINk"):
        assert db.offerings[offering].system.node.scale_up.bw_gb_per_s == 300
