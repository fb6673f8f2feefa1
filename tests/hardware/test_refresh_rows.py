"""Every row of a SkyPilot `vms.csv` is accounted for: used, or rejected with its line number and the reason."""

from __future__ import annotations

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.refresh_rows import parse_csv, parse_number
from linkscope.report.refresh_diff import line_ranges, skipped_lines

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,Price,Region,SpotPrice\n"


def _parse(body: str):
    return parse_csv(HEADER + body, "lambda", "vms.csv")


def test_every_bad_price_is_rejected_with_its_reason() -> None:
    text = ("InstanceType,Price,SpotPrice,Region\na,inf,,r\nb,-3,,r\nc,nan,,r\nd,abc,,r\ne,1e300,,r\n"
            "f,0,,r\ng,2.5,0.5,r\n")
    source = parse_csv(text, "lambda", "x.csv")
    reasons = {r.line: r.reason for r in source.rejected}
    assert reasons == {2: "Price inf is not a finite number", 3: "Price -3 is negative",
                       4: "Price nan is not a finite number", 5: "Price 'abc' is not a number",
                       6: "Price 1e300 is above $100,000/h", 7: "Price is 0 (not a price; row skipped)"}
    assert [r.instance for r in source.rows] == ["g"]
    assert [r.blocking for r in source.rejected] == [True] * 5 + [False]


@pytest.mark.parametrize("text", ["1_9.2", "0x10", "١٢", "1,5", "12.5.1", "+", ".", "1e", "--1"])
def test_only_plain_decimal_numbers_are_numbers(text: str) -> None:
    assert isinstance(parse_number(text), str)  # float() would read the first three as 19.2, 16 and 12


@pytest.mark.parametrize(("text", "value"), [("19.2", 19.2), ("0.5", 0.5), (".5", 0.5), ("2.", 2.0),
                                             ("1.2e3", 1200.0), ("+3", 3.0)])
def test_plain_numbers_parse(text: str, value: float) -> None:
    assert parse_number(text) == value


def test_a_price_with_a_digit_separator_is_a_blocking_rejection() -> None:
    parsed = _parse("gpu_8x_h100,H100,8,1_9.2,us-east-1,\n")
    [bad] = parsed.rejected
    assert (bad.line, bad.blocking, bad.reason) == (2, True, "Price '1_9.2' is not a number")
    assert parsed.rows == []


def test_a_ragged_row_is_rejected_with_its_line() -> None:
    parsed = _parse("gpu_1x_a10,A10,1,0.75,us-east-1,\ngpu_8x_h100,H100,8,23.92,us-east-1\n"
                    "gpu_2x_a10,A10,2,1.5,us-east-1,,extra\n")
    assert [(r.line, r.blocking, r.reason) for r in parsed.rejected] == [
        (3, True, "5 fields where the header has 6 (a ragged row)"),
        (4, True, "7 fields where the header has 6 (a ragged row)")]
    assert [r.instance for r in parsed.rows] == ["gpu_1x_a10"]


def test_rows_without_a_price_are_listed_by_line() -> None:
    parsed = _parse("a,A10,1,,r,\nb,A10,1,,r,\nc,A10,1,0.75,r,\nd,A10,1,,r,\n")
    assert [(r.line, r.kind, r.blocking) for r in parsed.rejected] == [
        (2, "no price", False), (3, "no price", False), (5, "no price", False)]
    assert skipped_lines(parsed.rejected) == ["skipped vms.csv line(s) 2-3, 5: no price (3 row(s))"]
    assert line_ranges([9, 1, 2, 3, 7, 8]) == "1-3, 7-9"


def test_a_repeated_row_is_dropped_and_a_conflicting_one_keeps_the_higher_price() -> None:
    parsed = _parse("gpu_8x_h100,H100,8,23.92,us-east-1,\ngpu_8x_h100,H100,8,23.92,us-east-1,\n"
                    "gpu_8x_h100,H100,8,11.0,us-east-1,\ngpu_8x_h100,H100,8,23.92,us-west-1,\n")
    assert [(r.region, r.price, r.line) for r in parsed.rows] == [("us-east-1", 23.92, 2), ("us-west-1", 23.92, 5)]
    reasons = {r.line: r.reason for r in parsed.rejected}
    assert reasons[3] == "repeats line 2 (lambda/gpu_8x_h100 in us-east-1) at the same prices; ignored"
    assert reasons[4] == ("repeats line 2 (lambda/gpu_8x_h100 in us-east-1) at Price 11 instead of 23.92: the "
                          "higher on-demand price (line 2) is kept")
    assert "skipped vms.csv:4: repeats line 2" in "\n".join(skipped_lines(parsed.rejected))


def test_a_spot_price_above_on_demand_is_dropped_and_reported() -> None:
    parsed = _parse("gpu_8x_h100,H100,8,19.2,us-east-1,5000\n")
    [row] = parsed.rows
    assert (row.price, row.spot_price) == (19.2, None)
    [dropped] = parsed.rejected
    assert dropped.reason == "SpotPrice 5000 is above Price 19.2; the spot price is dropped"
    assert skipped_lines(parsed.rejected) == [f"skipped {dropped}"]


@pytest.mark.parametrize("region", ['"us-east-1\nheld back lambda/x: 1 -> 2/h"', '"us\u202eeast"', '"us\x00east"'])
def test_a_name_that_is_not_one_printable_line_is_rejected(region: str) -> None:
    parsed = _parse(f"gpu_8x_h100,H100,8,23.92,{region},\n")
    [bad] = parsed.rejected
    assert bad.blocking and bad.line == 2 and bad.reason.startswith("Region contains a control or invisible")
    assert "\n" not in str(bad) and parsed.rows == []


def test_a_fractional_gpu_row_is_skipped_not_blocking() -> None:
    parsed = _parse("Standard_NV6ads_A10_v5,A10,0.166667,0.45,eastus,\n")
    [skipped] = parsed.rejected
    assert not skipped.blocking and skipped.kind == "fraction of a GPU" and parsed.rows == []
    assert _parse("x,A10,-1,0.45,eastus,\n").rejected[0].blocking


def test_a_rejection_never_prints_the_raw_field_as_lines() -> None:
    parsed = _parse('x,A10,1,"1\n2",eastus,\n')
    assert "\n" not in str(parsed.rejected[0])


def test_a_file_that_is_not_a_catalog_is_named() -> None:
    with pytest.raises(DataError, match="missing column InstanceType"):
        parse_csv("a,b\n1,2\n", "aws", "x.csv")
    with pytest.raises(DataError, match="not readable as CSV"):
        parse_csv("InstanceType,Price\n" + "x" * 200_000 + ",1\n", "aws", "x.csv")


@pytest.mark.parametrize("count", ["1_6", "inf", "nan", "1e9", "0x10"])
def test_an_accelerator_count_is_read_as_strictly_as_a_price(count: str) -> None:
    parsed = _parse(f"gpu_8x_h100,H100,{count},23.92,us-east-1,\n")
    [bad] = parsed.rejected
    assert bad.line == 2 and bad.blocking and "AcceleratorCount" in bad.reason
    assert parsed.rows == []
