"""Prices keep their published currency; `catalog --currency` converts them at the dated ECB rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkscope.hardware.currency import check_currency, in_currency, rates
from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import load_db
from tests.cli.helpers import run_cli

CNY_OFFERING = """
provider: testcloud-cn
offerings:
  - instance: h800x8
    gpu: H100
    gpus: 8
    scale_up: {kind: nvswitch}
    price_per_hour: 160.0
    currency: CNY
    price_as_of: 2026-11-01
    price_source: "a test listing"
    source: test
    as_of: 2026-11-01
"""


def _extra(tmp_path: Path) -> Path:
    path = tmp_path / "cn.yaml"
    path.write_text(CNY_OFFERING)
    return path


def test_rates_are_dated_and_sourced() -> None:
    r = rates()
    assert r.per_eur["EUR"] == 1.0 and r.per_eur["USD"] == 1.0705 and r.per_eur["CNY"] == 7.7748
    assert "ECB" in r.source and r.as_of.isoformat() == "2024-06-28"
    assert r.factor("CNY", "USD") == pytest.approx(1.0705 / 7.7748)


def test_a_price_keeps_its_currency_and_converts_for_display(tmp_path: Path) -> None:
    o = load_db([_extra(tmp_path)], include_user=False).offerings["testcloud-cn/h800x8"]
    assert (o.currency, o.price_per_hour) == ("CNY", 160.0)
    usd = in_currency(o, "USD")
    assert usd.currency == "USD" and usd.price_per_hour == pytest.approx(160.0 * 1.0705 / 7.7748, abs=1e-4)
    assert "converted from CNY at the ECB rate of 2024-06-28" in (usd.price_source or "")
    assert in_currency(o, "CNY") is o


def test_catalog_currency_option(tmp_path: Path) -> None:
    extra = str(_extra(tmp_path))
    shown = run_cli("catalog", "--catalog", extra, "--json", "--provider", "testcloud-cn")
    [row] = json.loads(shown.stdout)
    assert row["currency"] == "USD" and row["price_per_hour"] == pytest.approx(22.0301, abs=1e-3)
    native = run_cli("catalog", "--catalog", extra, "--json", "--provider", "testcloud-cn", "--currency", "cny")
    assert json.loads(native.stdout)[0]["price_per_hour"] == 160.0
    aws = json.loads(run_cli("catalog", "--json", "--provider", "aws", "--currency", "EUR").stdout)
    assert aws and all(r["currency"] == "EUR" for r in aws if r["price_per_hour"] is not None)
    # A filter is in the currency shown: 20 CNY/GPU-h passes, 20 USD/GPU-h of the same row does too, 2 does not.
    cheap = run_cli("catalog", "--catalog", extra, "--json", "--provider", "testcloud-cn", "--currency", "CNY",
                    "--max-price-per-gpu-hour", "20")
    assert len(json.loads(cheap.stdout)) == 1
    assert run_cli("catalog", "--catalog", extra, "--check").exit_code == 0  # banded in USD: 2.75 $/GPU-h


@pytest.mark.parametrize("bad", ["GBP", "", "usd;", "nan"])
def test_unknown_currency_is_a_user_error(bad: str) -> None:
    with pytest.raises(UserError):
        check_currency(bad)
    assert run_cli("catalog", "--currency", bad).exit_code == 2
