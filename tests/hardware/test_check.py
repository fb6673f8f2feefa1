"""`linkscope catalog --check`: the shipped data has no findings, and each kind of mistake is found."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from linkscope.hardware.check import check_db, stale_prices, stale_warning
from linkscope.hardware.loader import load_db
from tests.cli.helpers import run_cli

BAD = """
provider: testcloud
offerings:
  - instance: bad-per-gpu
    gpu: H100
    gpus: 8
    scale_up: {kind: nvswitch}
    price_per_hour: 24.0
    price_as_of: 2026-11-01
    price_source: "somewhere ($2.50/GPU-h)"
    source: test
    as_of: 2026-11-01
  - instance: bad-ib-rate
    gpu: H100
    gpus: 8
    scale_up: {kind: nvswitch}
    scale_out: {fabric: infiniband, generation: ib-ndr, nics: 8, nic_gbit_per_s: 300}
    source: test
    as_of: 2026-11-01
  - instance: bad-dates
    gpu: H100
    gpus: 8
    scale_up: {kind: nvswitch}
    price_per_hour: 20.0
    price_as_of: 2023-01-01
    price_source: test
    unconfirmed: [scale_out.nic_speed]
    source: test
    as_of: 2026-12-04
  - instance: bad-multi-node
    gpu: H100
    gpus: 8
    scale_up: {kind: nvswitch}
    multi_node: true
    source: test
    as_of: 2026-11-01
"""


def test_shipped_data_has_no_findings() -> None:
    assert [str(f) for f in check_db(load_db(include_user=False))] == []


def test_check_command_exits_zero_on_shipped_data(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    result = run_cli("catalog", "--check")
    assert result.exit_code == 0, result.stdout
    assert result.stdout.startswith("0 finding(s)")


def test_each_kind_of_mistake_is_found(monkeypatch, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    # 2026-12-04 is a day after the check's `today`: past the loader's slack it would not even load (below).
    found = [str(f) for f in check_db(load_db([bad], include_user=False), today=date(2026, 12, 3))]
    assert any("testcloud/bad-per-gpu" in f and "$2.5/GPU-h" in f for f in found)
    assert any("testcloud/bad-ib-rate" in f and "300 Gbit/s is not a known generation" in f for f in found)
    assert any("testcloud/bad-ib-rate" in f and "ib-ndr runs at 400" in f for f in found)
    assert any("bad-dates" in f and "placeholder" in f for f in found)
    assert any("bad-dates" in f and "in the future" in f for f in found)
    assert any("bad-dates" in f and "scale_out.nic_speed" in f for f in found)
    assert any("bad-multi-node" in f and "no scale-out fabric" in f for f in found)
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path / "empty"))
    result = run_cli("catalog", "--check", "--catalog", str(bad))
    assert result.exit_code == 1
    assert "testcloud/bad-per-gpu" in result.stdout


def test_stale_prices_are_named_oldest_first() -> None:
    db = load_db(include_user=False)
    old = stale_prices(db.offerings.values(), today=date(2027, 6, 1))
    assert old and all(o.price_as_of is not None for o in old)
    assert [o.price_as_of for o in old] == sorted(o.price_as_of for o in old)
    assert stale_warning(db.offerings.values(), today=date(2026, 1, 1)) is None
    assert "older than 90 days" in (stale_warning(db.offerings.values(), today=date(2027, 6, 1)) or "")


def test_catalog_and_advise_warn_on_stderr_about_old_prices(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    # DigitalOcean's MI300X price is dated 2026-05-28, more than 90 days before any run of this test.
    shown = run_cli("catalog", "--json", "--provider", "digitalocean", "--gpu", "MI300X")
    assert shown.exit_code == 0
    assert "older than 90 days" in shown.stderr
    assert "older than 90 days" not in shown.stdout
    used = run_cli("advise", "infer", "--model", "llama3.1-70b", "--latency-budget", "20", "--provider",
                   "digitalocean", "--gpu", "MI300X", "--json")
    assert used.exit_code == 0
    assert "older than 90 days" in used.stderr


PLANTED = """
provider: testcloud
offerings:
  - instance: cheap-h100
    gpu: H100
    gpus: 8
    scale_up: {kind: nvswitch}
    price_per_hour: 1.0
    price_as_of: 2026-11-01
    price_source: "a typo"
    source: test
    as_of: 2026-11-01
"""


def test_an_implausible_price_is_flagged(tmp_path: Path) -> None:
    extra = tmp_path / "planted.yaml"
    extra.write_text(PLANTED)
    result = run_cli("catalog", "--check", "--catalog", str(extra))
    assert result.exit_code == 1
    [line] = [ln for ln in result.stdout.splitlines() if ln.startswith("testcloud/cheap-h100")]
    assert "price_per_hour 1 is implausible: $0.12/GPU-h is outside the H100 band" in line


def test_a_planted_price_in_the_config_dir_is_flagged(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "prices.yaml").write_text(
        "price_overrides:\n  - offering: lambda/gpu_8x_h100_sxm5\n    price_per_hour: 1.0\n"
        "    price_as_of: 2026-11-01\n    price_source: a typo\n")
    result = run_cli("catalog", "--check")
    assert result.exit_code == 1 and "lambda/gpu_8x_h100_sxm5: price_per_hour 1 is implausible" in result.stdout


def test_the_catalog_covers_the_market() -> None:
    db = load_db(include_user=False)
    assert len(db.offerings) >= 360
    assert len({o.provider for o in db.offerings.values()}) >= 38
    unpriced = [o for o in db.offerings.values() if o.price_per_hour is None]
    assert unpriced and all(o.price_source for o in unpriced)  # each says why (no public price, not read)
    b300 = db.offerings["aws/p6-b300.48xlarge"]
    assert (b300.system.node.gpus, b300.system.node.scale_out.nics, b300.system.node.scale_out.nic_gbit_per_s) == \
        (8, 16, 400)
    assert check_db(db) == []


def test_a_date_far_in_the_future_does_not_load(tmp_path: Path) -> None:
    from linkscope.hardware.errors import DataError

    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD.replace("as_of: 2026-12-04", "as_of: 2999-01-02"))
    with pytest.raises(DataError, match="bad-dates.*as_of.*2999-01-02 is in the future"):
        load_db([bad], include_user=False)


CASES = """
provider: testcloud
offerings:
  - {instance: spot-above, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 19.2,
     spot_price_per_hour: 5000, price_as_of: 2026-11-01, price_source: t, source: t, as_of: 2026-11-01}
  - {instance: spot-too-low, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 19.2,
     spot_price_per_hour: 0.08, price_as_of: 2026-11-01, price_source: t, source: t, as_of: 2026-11-01}
  - {instance: spoofed-region, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 19.2,
     price_as_of: 2026-11-01, price_source: t, regions: ["us-east-1\\nlambda/x: 1 -> 2/h"], source: t,
     as_of: 2026-11-01}
  - {instance: bidi-source, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, price_per_hour: 19.2,
     price_as_of: 2026-11-01, price_source: "page \\u202e1.91", source: t, as_of: 2026-11-01}
  - {instance: unpriced, gpu: H100, gpus: 8, scale_up: {kind: nvswitch}, source: t, as_of: 2026-11-01}
  - {instance: per-node-row-on-a-rack, gpu: GB200, gpus: 72, scale_up: {kind: nvswitch}, price_per_hour: 64.0,
     price_as_of: 2026-11-01, price_source: "one 4-GPU node's row", source: t, as_of: 2026-11-01}
"""


@pytest.mark.parametrize(("instance", "message"), [
    ("spot-above", "spot_price_per_hour 5000 is above price_per_hour 19.2"),
    ("spot-above", "spot_price_per_hour 5000 is implausible: $625.00/GPU-h is outside the H100 spot band"),
    ("spot-too-low", "spot_price_per_hour 0.08 is implausible: $0.01/GPU-h is outside the H100 spot band"),
    ("spoofed-region", "regions contains a control or invisible character (U+000A)"),
    ("bidi-source", "price_source contains a control or invisible character (U+202E)"),
    ("unpriced", "no price and no price_source saying why"),
    ("per-node-row-on-a-rack", "price_per_hour 64 is implausible: $0.89/GPU-h is outside the B200 band"),
])
def test_check_flags_each_case_a_refresh_refuses(tmp_path: Path, instance: str, message: str) -> None:
    extra = tmp_path / "cases.yaml"
    extra.write_text(CASES)
    found = [str(f) for f in check_db(load_db([extra], include_user=False))]
    assert any(f.startswith(f"testcloud/{instance}: {message}") for f in found), found


def test_an_override_listed_twice_is_named(monkeypatch, tmp_path: Path) -> None:
    from linkscope.hardware.errors import DataError
    from linkscope.hardware.loader import ConfigFileWarning

    entry = "  - {offering: lambda/gpu_8x_a100, price_per_hour: 15.0, price_as_of: 2026-11-01, price_source: x}\n"
    twice = tmp_path / "prices.yaml"
    twice.write_text(f"price_overrides:\n{entry}{entry}")
    with pytest.raises(DataError, match="lambda/gpu_8x_a100 is listed twice"):
        load_db([twice], include_user=False)
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(tmp_path))
    with pytest.warns(ConfigFileWarning, match="listed twice; the later entry is used"):
        assert load_db().offerings["lambda/gpu_8x_a100"].price_per_hour == 15.0
