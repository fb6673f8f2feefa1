"""`linkscope catalog refresh` on checked-in samples of SkyPilot's real catalog files (see the fixture's SOURCES.md)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
import yaml

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import ConfigFileWarning, load_db
from linkscope.hardware.refresh import known_clouds, refresh
from linkscope.hardware.refresh_source import Stated, read_catalog, version_of
from linkscope.hardware.refresh_write import OVERRIDE_FILE, write_overrides
from linkscope.report.refresh_diff import refresh_lines
from tests.cli.helpers import run_cli

SAMPLE = Path(__file__).parents[1] / "fixtures" / "catalog" / "skypilot"
AFTER_ALL = date(2026, 12, 4)
"""A source date after every shipped price date: only rank, completeness and plausibility can hold a price back."""
BEFORE_NEBIUS = date(2026, 5, 1)
"""Before Nebius's 2026-06-01 price change."""


def stated(as_of: date | None, tree: Path = SAMPLE) -> Stated:
    """Every cloud of a sample tree dated `as_of`, as `--as-of CLOUD=DATE` per file states it."""
    clouds = {p.parent.name for p in tree.rglob("vms.csv")}
    return Stated({c: as_of for c in clouds} if as_of else {})


def as_of_options(as_of: str, tree: Path = SAMPLE) -> list[str]:
    """`--as-of CLOUD=DATE` for every cloud of a sample tree."""
    return [a for c in sorted({p.parent.name for p in tree.rglob("vms.csv")}) for a in ("--as-of", f"{c}={as_of}")]


def _report(as_of: date | None, tree: Path = SAMPLE):
    db = load_db(include_user=False)
    return refresh(db, read_catalog(str(tree), known_clouds(db), stated=stated(as_of, tree)))


def test_gcp_price_is_the_host_row_plus_the_gpu_rows() -> None:
    by_id = {c.offering: c for c in _report(AFTER_ALL).changes}
    a2 = by_id["gcp/a2-highgpu-8g"]
    assert a2.new_price == pytest.approx(5.91582 + 23.47126)  # host row + A100 x 8 row, us-central1
    assert a2.new_spot == pytest.approx(2.958 + 11.4728)
    assert a2.rows == "gcp/a2-highgpu-8g + gcp/gpu:A100:8"
    assert a2.region == "us-central1"
    ultra = by_id["gcp/a2-ultragpu-8g"]
    assert ultra.new_price == pytest.approx(8.79698 + 14.76958)
    # GCP's own prices rank above SkyPilot's dataset: shown, never applied.
    assert ultra.held_back and "provider" in ultra.held_back and not ultra.applied


def test_a_split_price_without_its_gpu_part_is_never_joined(tmp_path: Path) -> None:
    tree = tmp_path / "catalogs" / "v8" / "gcp"
    tree.mkdir(parents=True)
    lines = (SAMPLE / "catalogs" / "v8" / "gcp" / "vms.csv").read_text().splitlines()
    tree.joinpath("vms.csv").write_text("\n".join(line for line in lines if ",,,A100," not in line) + "\n")
    report = _report(AFTER_ALL, tmp_path)
    assert "gcp/a2-highgpu-8g" not in {c.offering for c in report.changes}
    assert any(u.startswith("gcp/a2-highgpu-8g (no row for gcp/gpu:A100:8") for u in report.unmatched)


def test_no_newer_price_is_downgraded() -> None:
    by_id = {c.offering: c for c in _report(BEFORE_NEBIUS).changes}
    b200 = by_id["nebius/gpu-b200-sxm_8gpu-160vcpu-1792gb"]
    assert (b200.old_price, b200.new_price) == (57.20, 44.00)
    assert b200.held_back == "the current price is newer (2026-06-01 > 2026-05-01)"
    assert not any(c.applied for c in by_id.values() if c.offering.startswith("nebius/"))


def test_marketplace_rows_move_to_a_host_that_became_a_cloud() -> None:
    report = _report(AFTER_ALL)
    by_id = {c.offering: c for c in report.changes}
    assert by_id["hyperstack/H100x8"].rows == "hyperstack/n3-H100x8"  # v7 Shadeform key gone; the native v8 row
    assert by_id["crusoe/A100-80Gx4"].rows == "shadeform/crusoe_A100-80GBx4"  # renamed SKU, through its alias
    lines = "\n".join(refresh_lines(report))
    assert by_id["hyperstack/n3-A100x8-NVLink"].rows == "hyperstack/n3-A100x8-NVLink"
    assert "hyperstack: " not in lines  # every native Hyperstack row of the sample now has an offering
    assert any(u.startswith("hyperstack/8x-h100-sxm (no row") for u in report.unmatched)


def test_verda_rows_join_its_native_cloud() -> None:
    report = _report(AFTER_ALL)
    by_id = {c.offering: c for c in report.changes}
    h200 = by_id["verda/H200x8"]  # once Shadeform's datacrunch_H200x8; Verda's own v8 file names it 8H200.141S.176V
    assert h200.rows == "verda/8H200.141S.176V"
    # The shipped price was re-sourced from that very v8 row: the refresh finds nothing to change.
    assert (h200.old_price, h200.new_price, h200.new_spot) == (20.72, 20.72, 10.36) and not h200.changed
    assert h200.kind == "dataset" and h200.region_switch is None
    assert by_id["verda/B200x8"].new_price == 30.32 and by_id["verda/B200x8"].new_spot is None
    assert {c.offering for c in report.changes if c.offering.startswith("verda/")} == {
        f"verda/{i}" for i in ("B200", "B200x2", "B200x4", "B200x8", "H200", "H200x2", "H200x8", "H100-sxm5",
                               "A100-sxm4-80Gx4", "A100-sxm4-80Gx8", "V100", "V100x8", "L40S", "B300x8",
                               "RTXPRO6000x8")}
    # Verda's own 8x V100 row ($0.14 per GPU-hour) is outside the V100 band: shown, never applied.
    v100 = by_id["verda/V100x8"]
    assert v100.new_price == 1.1 and "is outside the V100 band" in (v100.held_back or "")
    assert v100.region_switch == "helsinki-finland-1 -> FIN-03"
    lines = refresh_lines(report)
    assert "region switch verda/V100x8: helsinki-finland-1 -> FIN-03" in lines
    assert "verda: " not in "\n".join(lines)  # every row of the sample has an offering


def test_a_region_switch_is_reported(tmp_path: Path) -> None:
    tree = tmp_path / "catalogs" / "v8" / "hyperstack"
    tree.mkdir(parents=True)
    text = (SAMPLE / "catalogs" / "v8" / "hyperstack" / "vms.csv").read_text()
    tree.joinpath("vms.csv").write_text(text.replace("15.2,CANADA-1", "15.2,NORWAY-1"))
    report = _report(AFTER_ALL, tmp_path)
    h100 = next(c for c in report.changes if c.offering == "hyperstack/H100x8")
    assert h100.region_switch == "CANADA-1 -> NORWAY-1" and not h100.changed
    assert "region switch hyperstack/H100x8: CANADA-1 -> NORWAY-1" in refresh_lines(report)


def test_versions_compare_as_numbers(tmp_path: Path) -> None:
    assert version_of("v10") > version_of("v9")
    for version, price in (("v9", "11.0"), ("v10", "12.0")):
        folder = tmp_path / "catalogs" / version / "lambda"
        folder.mkdir(parents=True)
        folder.joinpath("vms.csv").write_text(f"InstanceType,Price,Region\ngpu_8x_a100,{price},us-east-1\n")
    db = load_db(include_user=False)
    source = read_catalog(str(tmp_path), known_clouds(db), stated=stated(AFTER_ALL, tmp_path))
    assert source.files["lambda"].version == 10 and source.rows[0].price == 12.0
    (tmp_path / "catalogs" / "vX" / "lambda").mkdir(parents=True)
    (tmp_path / "catalogs" / "vX" / "lambda" / "vms.csv").write_text("InstanceType,Price\n")
    with pytest.raises(UserError, match="'vX' is not v<number>"):
        read_catalog(str(tmp_path), known_clouds(db), stated=Stated())


def _newer_listing(tmp_path: Path) -> Path:
    """A v8 Shadeform file with the v7 Scaleway L40S x 4 row (6.23/h there) at 7.5/h."""
    tree = tmp_path / "catalogs" / "v8" / "shadeform"
    tree.mkdir(parents=True)
    header, *rows = (SAMPLE / "catalogs" / "v7" / "shadeform" / "vms.csv").read_text().splitlines()
    row = next(r for r in rows if r.startswith("scaleway_L40Sx4,"))
    tree.joinpath("vms.csv").write_text(f"{header}\n{row.replace(',6.23,', ',7.5,')}\n")
    return tmp_path


def test_written_override_is_applied_and_dated_by_the_source(tmp_path: Path) -> None:
    report = _report(AFTER_ALL, _newer_listing(tmp_path))
    assert [c.offering for c in report.changes if c.applied] == ["scaleway/L40Sx4"]
    path = write_overrides(report, tmp_path / "config").path
    [entry] = yaml.safe_load(path.read_text())["price_overrides"]
    assert entry["price_per_hour"] == 7.5 and entry["price_as_of"] == AFTER_ALL
    assert entry["price_source_kind"] == "marketplace"
    assert entry["price_source"].startswith("SkyPilot catalog v8 shadeform/vms.csv (skypilot-org/skypilot-catalog")
    assert not list((tmp_path / "config").glob(".prices-*"))  # no temporary file left behind
    assert load_db([path], include_user=False).offerings["scaleway/L40Sx4"].price_per_hour == 7.5


def test_an_unwritable_config_dir_is_a_user_error(monkeypatch, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(blocker))
    result = run_cli("catalog", "refresh", "--from", str(_newer_listing(tmp_path)), "--as-of",
                     "shadeform=2026-12-04", "--apply")
    assert result.exit_code == 2 and "cannot write" in result.stderr and "Traceback" not in result.output
    assert blocker.read_text() == ""


def test_refresh_shows_the_diff_and_writes_only_with_apply(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    shown = run_cli("catalog", "refresh", "--from", str(SAMPLE), *as_of_options("2026-12-03"))
    assert shown.exit_code == 0, shown.stderr
    assert "held back nebius/gpu-b200-sxm_8gpu-160vcpu-1792gb: 57.2 -> 44/h" in shown.stdout
    assert "source: catalogs/v8/gcp/vms.csv: SkyPilot catalog v8 gcp/vms.csv" in shown.stdout
    assert not (tmp_path / OVERRIDE_FILE).exists()
    assert run_cli("catalog", "refresh", "--from", str(SAMPLE), *as_of_options("2026-12-03"),
                   "--apply").exit_code == 0
    assert run_cli("catalog", "--check").exit_code == 0


@pytest.mark.parametrize("price", ["inf", "-1", "nan", "1e300", "banana"])
def test_a_bad_price_writes_nothing(monkeypatch, tmp_path: Path, price: str) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path / "config"))
    bad = tmp_path / "lambda" / "vms.csv"
    bad.parent.mkdir()
    bad.write_text(f"InstanceType,Price,Region\ngpu_8x_a100,{price},us-east-1\ngpu_8x_v100,4.4,us-east-1\n")
    result = run_cli("catalog", "refresh", "--from", str(bad), "--as-of", "2026-12-03", "--apply")
    assert result.exit_code == 2
    assert f"rejected {bad}:2: Price" in result.stderr
    assert "nothing written" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "config").exists()
    assert run_cli("catalog", "--json", "--provider", "lambda").exit_code == 0


def test_bad_sources_and_targets_are_one_line_errors(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    binary = tmp_path / "lambda" / "vms.csv"
    binary.parent.mkdir()
    binary.write_bytes(b"\xff\xfe\x00bad")
    assert run_cli("catalog", "refresh", "--from", str(binary)).exit_code == 2
    assert run_cli("catalog", "refresh", "--from", str(tmp_path / "nope")).exit_code == 2
    unknown = tmp_path / "nosuchcloud" / "vms.csv"
    unknown.parent.mkdir()
    unknown.write_text("InstanceType,Price\nx,1\n")
    result = run_cli("catalog", "refresh", "--from", str(unknown))
    assert result.exit_code == 2 and "unknown provider 'nosuchcloud'" in result.stderr
    assert run_cli("catalog", "refresh", "--from", str(SAMPLE), "--as-of", "yesterday").exit_code == 2


def test_undated_source_holds_every_price_back() -> None:
    report = _report(None)
    assert report.changes and all(c.held_back for c in report.changes if c.changed)
    assert json.dumps([c.offering for c in report.changes])


def test_a_broken_config_file_is_skipped_with_a_warning(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    bad = tmp_path / OVERRIDE_FILE
    bad.write_text("price_overrides:\n  - offering: lambda/gpu_8x_a100\n    price_per_hour: .inf\n"
                   "    price_as_of: 2026-11-01\n    price_source: x\n")
    for command in (["catalog", "--json"], ["systems"]):
        with pytest.warns(ConfigFileWarning, match="delete it: rm"):
            result = run_cli(*command)
        assert result.exit_code == 0, result.output
    with pytest.warns(ConfigFileWarning):
        shown = run_cli("catalog", "--json", "--provider", "lambda")
    assert next(r for r in json.loads(shown.stdout) if r["id"] == "lambda/gpu_8x_a100")["price_per_hour"] != \
        float("inf")


GUARDED = """
offerings:
  - {provider: alpha, instance: h100x8, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 23.92,
     price_as_of: 2026-01-10, price_source: "SkyPilot catalog v7 alpha/vms.csv", source: t, as_of: 2026-01-10}
  - {provider: alpha, instance: gb200-rack, gpu: GB200, gpus: 72, scale_up: {kind: nvswitch}, source: t,
     price_source: "no public price: test", as_of: 2026-01-10}
  - {provider: alpha, instance: h100x1, gpu: H100, gpus: 1, scale_up: {kind: pcie}, source: t,
     price_source: "no public price: test", as_of: 2026-01-10}
"""
HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"


def _guarded(tmp_path: Path, rows: str) -> dict:
    tmp_path.mkdir(exist_ok=True)
    extra = tmp_path / "offerings.yaml"
    extra.write_text(GUARDED)
    tree = tmp_path / "tree"
    (tree / "catalogs" / "v8" / "alpha").mkdir(parents=True)
    (tree / "catalogs" / "v8" / "alpha" / "vms.csv").write_text(HEADER + rows)
    db = load_db([extra], include_user=False)
    report = refresh(db, read_catalog(str(tree), known_clouds(db), stated=Stated({"alpha": AFTER_ALL})))
    return {c.offering: c for c in report.changes} | {u.split(" ")[0]: u for u in report.unmatched}


def test_a_price_that_jumps_more_than_twofold_is_held_back(tmp_path: Path) -> None:
    # $95/h for 8 H100s is inside the H100 band (Azure lists about that), but not a step any real price took.
    h100 = _guarded(tmp_path, "h100x8,H100,8,208,1800,95.0,r1,,\n")["alpha/h100x8"]
    assert h100.held_back == ("the price would move 3.97x at once (23.92 -> 95; more than 2x); check the source, "
                              "and set it by hand if it is right")
    assert _guarded(tmp_path / "ok", "h100x8,H100,8,208,1800,31.92,r1,,\n")["alpha/h100x8"].applied


def test_spot_prices_are_checked_against_on_demand_and_the_band(tmp_path: Path) -> None:
    # A row's spot above its on-demand price never reaches an offering (see test_refresh_rows); a spot far under
    # the family's band is held back with the whole price.
    cheap = _guarded(tmp_path, "h100x8,H100,8,208,1800,24.0,r1,,0.08\n")["alpha/h100x8"]
    assert cheap.held_back and cheap.held_back.startswith("the spot price $0.01/GPU-h is outside the H100 spot band")


def test_a_rack_priced_row_is_never_joined_to_a_node_nor_a_node_row_to_a_rack(tmp_path: Path) -> None:
    by_id = _guarded(tmp_path, "gb200-rack,GB200,4,144,960,64.0,r1,,\nh100x1,H100,8,208,1800,24.0,r1,,\n")
    assert "the source rows price 4 GPU(s), the offering has 72" in by_id["alpha/gb200-rack"]
    assert "the source rows price 8 GPU(s), the offering has 1" in by_id["alpha/h100x1"]


def test_the_band_is_tighter_than_five_fold_and_comes_from_the_catalog() -> None:
    from linkscope.hardware.plausibility import MAX_FACTOR, MIN_FACTOR, family_bands

    bands = family_bands(load_db(include_user=False).offerings.values())
    for family in bands.medians:
        band = bands.band(family)
        assert band is not None and band.median / MAX_FACTOR <= band.low <= band.median / MIN_FACTOR
        assert band.median * MIN_FACTOR <= band.high <= band.median * MAX_FACTOR
    tight = [f for f in bands.medians if (b := bands.band(f)) and b.high / b.low < 0.99 * MAX_FACTOR ** 2]
    assert len(tight) == len(bands.medians)  # every family's band is narrower than the old fixed 5x each way
    b200 = bands.band("B200")
    assert b200 is not None and bands.check(b200.median * 8, "B200")  # a per-GPU price entered as a node price


def test_leave_one_out_keeps_a_wrong_price_from_widening_its_own_band(tmp_path: Path) -> None:
    from linkscope.hardware.plausibility import family_bands

    extra = tmp_path / "planted.yaml"
    extra.write_text("offerings:\n  - {provider: alpha, instance: x, gpu: B200, gpus: 8, scale_up: {kind: nvswitch}, "
                     "price_per_hour: 400.0, price_as_of: 2026-11-01, price_source: t, source: t, as_of: 2026-11-01}\n")
    bands = family_bands(load_db([extra], include_user=False).offerings.values())
    assert bands.check(50.0, "B200", leave_out="alpha/x") is not None


def test_seeweb_rows_are_euros(tmp_path: Path) -> None:
    # SkyPilot's Seeweb fetcher copies the API's hourly_price (EUR) unconverted: the rows are joined as EUR prices.
    tree = tmp_path / "catalogs" / "v8" / "seeweb"
    tree.mkdir(parents=True)
    (tree / "vms.csv").write_text("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,"
                                  "SpotPrice\nECS1GPU10,H200,1,16,120,2.7,it-fr2,,\n")
    db = load_db(include_user=False)
    report = refresh(db, read_catalog(str(tmp_path), known_clouds(db), stated=Stated({"seeweb": AFTER_ALL})))
    [change] = [c for c in report.changes if c.offering == "seeweb/ECS1GPU10"]
    assert db.offerings["seeweb/ECS1GPU10"].currency == "EUR"
    assert change.currency == "EUR" and change.applied and change.new_price == 2.7
    path = write_overrides(report, tmp_path / "config").path
    assert load_db([path], include_user=False).offerings["seeweb/ECS1GPU10"].currency == "EUR"
