"""NCCL's algorithm/protocol choices (NCCL_DEBUG_SUBSYS=TUNING) read from recorded log lines, both forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import UserError
from linkscope.probe.nccl_lines import choices_by_size, nccl_bytes, parse_log, tuning_choice
from linkscope.probe.nccl_log import read_nccl_log
from tests.probe.fixtures import PROBE_FIXTURES, fixture_text


def test_the_named_form_gives_op_size_algorithm_protocol_and_channels() -> None:
    log = parse_log(fixture_text("nccl_tuning_named.log"))
    assert not log.problems
    sizes = choices_by_size(log.tuning)
    assert [c.nccl_bytes for c in sizes] == [32768 << i for i in range(13)]
    assert {(c.op, c.algo, c.proto) for c in sizes} == {("broadcast", "RING", "SIMPLE")}
    assert [c.channels for c in sizes[:4]] == [1, 2, 4, 4]
    assert sizes[-1].nccl_bytes == 134217728  # "Broadcast:134217728 Bytes", no space after the colon
    assert sizes[0].label() == "RING/SIMPLE x1"


def test_the_numeric_form_maps_indices_to_names_and_keeps_the_model_time() -> None:
    log = parse_log(fixture_text("nccl_tuning_numeric.log"))
    assert not log.problems
    sizes = choices_by_size(log.tuning)
    assert [(c.nccl_bytes, c.algo, c.proto, c.calls) for c in sizes] == [
        (256, "TREE", "LL", 3), (512, "TREE", "LL", 2), (262144, "TREE", "LL128", 2)]
    assert {c.op for c in sizes} == {None}  # the numeric form does not name the collective
    assert log.tuning[0].model_time_us == pytest.approx(25.229528)
    assert log.tuning[0].host == "h100clust-worker-1"


def test_the_line_quoted_in_nccl_issue_1595_reads_as_ring_simple() -> None:
    # NVIDIA/nccl#1595 ("Forcing Ring Allreduce to use Simple protocol"), printed as "[0] NCCL INFO ...".
    (choice,) = parse_log("[0] NCCL INFO 805306368 Bytes -> Algo 1 proto 2 time 3970.683594\n").tuning
    assert (choice.nccl_bytes, choice.algo, choice.proto, choice.model_time_us) == (805306368, "RING", "SIMPLE",
                                                                                    3970.683594)


def test_mixed_choices_for_one_size_keep_the_majority_and_count_the_rest() -> None:
    text = "".join(f"NCCL INFO AllReduce: 8388608 Bytes -> Algo {a} proto LL128 channel{{Lo..Hi}}={{0..15}}\n"
                   for a in ("Ring", "Ring", "Tree"))
    (size,) = choices_by_size(parse_log(text).tuning)
    assert (size.op, size.algo, size.channels, size.calls, size.other_calls) == ("all_reduce", "RING", 16, 3, 1)


@pytest.mark.parametrize("message", [
    "AllReduce: 4096 Bytes -> Algo Ring",
    "AllReduce: 4096 Bytes -> Algo 9 proto 7 time 1.0",
    "Frobnicate: 4096 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}",
    "4096 Bytes -> Algo 9 proto 2 time 1.0",
])
def test_an_unknown_tuning_format_is_a_problem_not_a_guess(message: str) -> None:
    log = parse_log(f"host:1:1 [0] NCCL INFO {message}\n")
    assert log.tuning == [] and [p.message for p in log.problems] == ["TUNING line of an unknown format"]
    assert tuning_choice(1, message) is None


def test_other_lines_that_name_a_collective_are_not_choices() -> None:
    text = ("host:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f0 recvbuff 0x7f0 count 1 datatype 7 op 0 "
            "root 0 comm 0x55 [nranks=16] stream 0x55\n")
    log = parse_log(text)
    assert log.tuning == [] and log.problems == []


def test_nccl_log_refuses_a_file_with_an_unknown_tuning_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.log"
    path.write_text((PROBE_FIXTURES / "nccl_tuning_named.log").read_text()
                    + "NCCL INFO AllReduce: 4096 Bytes -> Algo Ring\n")
    with pytest.raises(UserError, match=r"bad\.log:20: TUNING line of an unknown format"):
        read_nccl_log(path)


def test_bytes_per_rank_for_gathers_and_scatters() -> None:
    assert nccl_bytes("all_reduce", 1 << 20, 8) == 1 << 20
    assert nccl_bytes("all_gather", 1 << 20, 8) == 1 << 17
    assert nccl_bytes("reduce_scatter", 1 << 20, 8) == 1 << 17
