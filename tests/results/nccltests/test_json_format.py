"""The `-J` JSON file: same rows as the text output of the same run, and tolerance of odd entries."""

from __future__ import annotations

import copy
import json

import pytest

from linkscope.results.nccltests import parse_nccl_tests_json, parse_nccl_tests_text
from tests.results.helpers import V2_13, V2_13_JSON


@pytest.fixture
def document():
    return json.loads(V2_13_JSON.read_text())


def test_json_gives_the_same_rows_as_the_text_of_the_same_run(document):
    from_json = parse_nccl_tests_json(document, "run.json")
    from_text = parse_nccl_tests_text(V2_13.read_text(), "run.txt")
    assert from_json.problems == []
    assert from_json.rows == from_text.rows


def test_json_metadata(document):
    parsed = parse_nccl_tests_json(document, "run.json")
    [section] = parsed.sections
    assert (section.op, section.binary) == ("all_reduce", "all_reduce_perf")
    assert section.world_size == 16 and parsed.hosts == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert section.devices[15].bus_id == "0000:8c:00" and section.devices[15].pid == 6740
    assert section.config["iters"] == 20 and section.config["min_bytes"] == 8
    assert (section.avg_busbw, section.out_of_bounds, section.out_of_bounds_ok) == (70.742, 0, True)
    assert parsed.command.startswith("/opt/src/nccl-tests/build/all_reduce_perf -b 8")


def test_json_null_placement_nan_and_missing_fields(document):
    results = document["results"]
    results[0]["out_of_place"] = None                 # nccl-tests writes null for a placement not run
    results[1]["in_place"]["nwrong"] = None           # unchecked: N/A in the text output
    results[2]["out_of_place"]["time"] = "nan"        # how nccl-tests writes a NaN double
    del results[3]["size"]
    results[4] = "garbage"
    parsed = parse_nccl_tests_json(document, "odd.json")
    assert [r.placement for r in parsed.rows[:2]] == ["in_place", "out_of_place"]
    assert parsed.rows[2].nwrong is None
    assert [str(p) for p in parsed.problems] == [
        "results[2]: out_of_place.time is 'nan', not a finite number",
        "results[3]: size/count/type/redop/root unreadable (KeyError('size'))",
        "results[4]: not an object"]
    assert len(parsed.rows) == 62 - 1 - 2 * 3


def test_json_list_of_documents_and_top_level_devices(document):
    second = copy.deepcopy(document)
    second["args"] = ["./build/all_gather_perf"]
    second["devices"] = second["config"].pop("devices")[:8]
    parsed = parse_nccl_tests_json([document, second, {"not": "a report"}], "many.json")
    assert [(s.op, s.world_size) for s in parsed.sections] == [("all_reduce", 16), ("all_gather", 8)]
    assert [str(p) for p in parsed.problems] == ["document 2: not an nccl-tests JSON report (no 'results' list)"]


@pytest.mark.parametrize("data", [None, 3, "text", [], {"results": "no"}])
def test_json_that_is_not_a_report_gives_no_rows(data):
    assert parse_nccl_tests_json(data, "x").rows == []


def test_json_per_iteration_statistics(document):
    document["results"][0]["out_of_place_per_iter"] = {"min_us": 120.0, "p99_us": 150.5, "cv_pct": 2.5,
                                                       "times_us": [1, 2]}
    row = parse_nccl_tests_json(document, "x").rows[0]
    assert row.iter_stats == {"min_us": 120.0, "p99_us": 150.5, "cv_pct": 2.5}
