"""`nvidia-smi nvlink -s`, `--query-gpu` CSV, and the reader that runs the three commands."""

from __future__ import annotations

from collections.abc import Sequence

from linkscope.probe.runner import CommandResult
from linkscope.probe.smi import QUERY_COMMAND, parse_gpu_query, parse_nvlink_status, read_smi
from tests.probe.fixtures import fixture_text, h100_smi_runner, replay


def test_a100_has_twelve_links_at_25_gb_per_s() -> None:
    status = parse_nvlink_status(fixture_text("nvlink_a100.txt"))
    assert status.problems == []
    gpu = status.gpus[0]
    assert gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.uuid == "GPU-ff8a40d4-\u2026"
    assert gpu.active_nvlinks == 12
    assert gpu.nvlink_reported_gb_per_s == 300.0


def test_gb200_links_keep_fractional_rates() -> None:
    gpu = parse_nvlink_status(fixture_text("nvlink_gb200.txt")).gpus[0]
    assert gpu.name == "NVIDIA GB200"
    assert [link.gb_per_s for link in gpu.nvlinks] == [53.125] * 18
    assert gpu.nvlink_reported_gb_per_s == 956.25


def test_h100_inactive_link_is_kept_but_not_counted() -> None:
    status = parse_nvlink_status(fixture_text("nvlink_h100_8gpu.txt"))
    assert sorted(status.gpus) == list(range(8))
    assert status.gpus[0].nvlink_reported_gb_per_s == 478.125
    assert status.gpus[3].active_nvlinks == 17
    assert status.gpus[3].nvlinks[17].active is False


def test_unreadable_link_and_stray_lines_are_problems() -> None:
    text = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n\t Link 0: fast\n\t Link 1: 25 GB/s\nbanana\n"
    status = parse_nvlink_status(text)
    assert [(p.line, p.message) for p in status.problems] == [(2, "link 0: unreadable rate 'fast'"),
                                                               (4, "unexpected line")]
    assert status.gpus[0].active_nvlinks == 1


def test_query_gpu_csv_reads_name_memory_and_pcie() -> None:
    rows, problems = parse_gpu_query(fixture_text("query_gpu_h100_8gpu.csv"))
    assert problems == []
    assert len(rows) == 8
    gpu = rows[0].gpu
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_gib == 79.65
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_max) == (1, 5, 16)
    assert gpu.pci_bus_id == "00000000:18:00.0"
    assert rows[0].driver_version == "535.104.05"


def test_query_gpu_tolerates_na_values_and_reports_bad_rows() -> None:
    text = ("0, NVIDIA L40S, [N/A], 00000000:01:00.0, 46068, [N/A], 4, 16, [Not Supported], 550.54\n"
            "1, NVIDIA L40S, GPU-y\n")
    rows, problems = parse_gpu_query(text)
    assert rows[0].gpu.uuid is None and rows[0].gpu.pcie_gen_current is None and rows[0].gpu.pcie_width_max is None
    assert problems[0].line == 2 and "expected 10 values, got 3" in problems[0].message


def test_read_smi_combines_the_three_commands() -> None:
    reading = read_smi(h100_smi_runner())
    assert reading.errors == [] and reading.problems == []
    assert len(reading.gpus) == 8
    assert reading.gpus[5].active_nvlinks == 18
    assert reading.gpus[5].numa_node == 1  # from the NUMA Affinity column of topo -m
    assert reading.topo is not None and reading.topo.nic_names["NIC0"] == "mlx5_0"
    assert reading.driver_version == "535.104.05"


def test_read_smi_keeps_gpus_when_nvlink_and_topo_fail() -> None:
    runner = replay({QUERY_COMMAND: fixture_text("query_gpu_h100_8gpu.csv")})
    reading = read_smi(runner)
    assert len(reading.gpus) == 8 and reading.topo is None
    assert reading.errors == ["`nvidia-smi` not found", "`nvidia-smi` not found"]


def test_read_smi_reports_a_failing_driver() -> None:
    def broken(args: Sequence[str]) -> CommandResult:  # the driver is not loaded: nvidia-smi exits 9 with a message
        return CommandResult(tuple(args), 9, "NVIDIA-SMI has failed because it couldn't communicate with the "
                                             "NVIDIA driver.\n")

    reading = read_smi(broken)
    assert reading.gpus == []
    assert reading.errors[0].startswith("`nvidia-smi --query-gpu=")
    assert "exited 9: NVIDIA-SMI has failed" in reading.errors[0]
