"""The NVML reader, run against a stand-in for the `pynvml` module (nvidia-ml-py is not needed for the tests).

The stand-in answers the calls the reader makes with the values an 8x H100 NVSwitch board or a 4x H100 mesh
would give; what it checks is how the reader turns those answers into GPUs, links and the GPU matrix.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from linkscope.probe.nvml import read_nvml

SWITCH = "switch"


class NVMLError(Exception):
    """Like pynvml.NVMLError: raised for unsupported queries and missing links."""


class FakeNvml:
    """Answers the pynvml calls of `read_nvml` for GPUs whose links go to `remotes[gpu][link]`."""

    NVML_NVLINK_MAX_LINKS = 18
    NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON = 90
    NVMLError = NVMLError

    def __init__(self, name: str, remotes: list[list[str | None]], speed_mbps: int = 26562,
                 init_error: str | None = None) -> None:
        self.name, self.remotes, self.speed_mbps, self.init_error = name, remotes, speed_mbps, init_error
        self.bus_ids = [f"00000000:{0x18 + 0x10 * i:02X}:00.0" for i in range(len(remotes))]
        self.shut_down = False

    def nvmlInit(self) -> None:
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.90.07"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlDeviceGetCount(self) -> int:
        return len(self.remotes)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.name.encode()  # older bindings return bytes

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-{handle}"

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:
        return SimpleNamespace(busId=self.bus_ids[handle])

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(total=85520809984)

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return 5

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        raise NVMLError("Not Supported")

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        if link >= len(self.remotes[handle]):
            raise NVMLError("Invalid Argument")
        return 0 if self.remotes[handle][link] is None else 1

    def nvmlDeviceGetFieldValues(self, handle: int, field_ids: list[int]) -> list[Any]:
        return [SimpleNamespace(nvmlReturn=0, valueType=1, value=SimpleNamespace(uiVal=self.speed_mbps))]

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: int, link: int) -> int:
        return 2 if self.remotes[handle][link] == SWITCH else 0

    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, handle: int, link: int) -> Any:
        return SimpleNamespace(busId=self.remotes[handle][link])

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        return 0

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return 40 if (a < 4) == (b < 4) else 50


def hgx(links_down: int = 0) -> FakeNvml:
    """8 GPUs with 18 links each into NVSwitch; GPU 3 has `links_down` inactive links."""
    remotes: list[list[str | None]] = [[SWITCH] * 18 for _ in range(8)]
    for link in range(links_down):
        remotes[3][link] = None
    return FakeNvml("NVIDIA H100 80GB HBM3", remotes)


def mesh4() -> FakeNvml:
    """4 GPUs joined point to point, 6 links to each peer."""
    fake = FakeNvml("NVIDIA H100 80GB HBM3", [[None] * 18 for _ in range(4)])
    for gpu in range(4):
        peers = [p for p in range(4) if p != gpu]
        fake.remotes[gpu] = [fake.bus_ids[peers[link // 6]] for link in range(18)]
    return fake


def test_nvswitch_board_gives_gpus_links_and_an_nv18_matrix() -> None:
    fake = hgx()
    reading = read_nvml(fake)
    assert reading.error is None and fake.shut_down
    assert (reading.driver_version, reading.cuda_driver_version) == ("550.90.07", "12.4")
    gpu = reading.gpus[0]
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.compute_capability == "9.0"
    assert gpu.memory_gib == 79.65 and gpu.pci_bus_id == "0000:18:00.0"
    assert (gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 16, None)
    assert gpu.active_nvlinks == 18 and gpu.nvlinks[0].gb_per_s == 26.562 and gpu.nvlinks[0].remote == SWITCH
    assert reading.topo is not None and reading.topo.source == "nvml"
    assert reading.topo.cell("GPU0", "GPU7") == "NV18" and reading.topo.cell("GPU2", "GPU2") == "X"


def test_inactive_links_lower_the_pair_count_through_the_switch() -> None:
    reading = read_nvml(hgx(links_down=2))
    assert reading.gpus[3].active_nvlinks == 16
    assert reading.topo is not None
    assert reading.topo.cell("GPU3", "GPU0") == "NV16" and reading.topo.cell("GPU0", "GPU1") == "NV18"


def test_point_to_point_mesh_counts_links_per_peer() -> None:
    reading = read_nvml(mesh4())
    assert reading.topo is not None
    assert {reading.topo.cell("GPU0", f"GPU{b}") for b in (1, 2, 3)} == {"NV6"}


def test_pcie_only_gpus_get_pcie_levels() -> None:
    fake = FakeNvml("NVIDIA L40S", [[] for _ in range(8)])
    reading = read_nvml(fake)
    assert reading.topo is not None
    assert reading.topo.cell("GPU0", "GPU1") == "NODE" and reading.topo.cell("GPU0", "GPU4") == "SYS"
    assert reading.gpus[0].nvlinks == []


def test_driver_that_does_not_start_is_an_error_not_an_exception() -> None:
    reading = read_nvml(FakeNvml("x", [[]], init_error="Driver Not Loaded"))
    assert reading.gpus == [] and reading.error == "NVML did not start: Driver Not Loaded"


def test_no_gpu_is_reported() -> None:
    reading = read_nvml(FakeNvml("x", []))
    assert reading.gpus == [] and reading.error == "NVML reports no GPU"


def test_missing_package_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail like an absent package
    reading = read_nvml()
    assert reading.gpus == [] and reading.error == "nvidia-ml-py (pynvml) is not installed"


def test_numa_node_comes_from_the_pci_device_in_sysfs(tmp_path: Path) -> None:
    (tmp_path / "0000:18:00.0").mkdir()
    (tmp_path / "0000:18:00.0" / "numa_node").write_text("1\n")
    (tmp_path / "0000:28:00.0").mkdir()
    (tmp_path / "0000:28:00.0" / "numa_node").write_text("-1\n")
    reading = read_nvml(hgx(), pci_root=tmp_path)
    assert [gpu.numa_node for gpu in reading.gpus[:3]] == [1, None, None]


class LostGpuNvml(FakeNvml):
    """A board where one GPU fell off the bus: NVML lists it but cannot open it."""

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index == 2:
            raise NVMLError("GPU is lost")
        return index


def test_gpu_that_cannot_be_opened_is_left_out_with_a_note() -> None:
    fake = LostGpuNvml("NVIDIA H100 80GB HBM3", [[SWITCH] * 18 for _ in range(4)])
    reading = read_nvml(fake)
    assert [gpu.index for gpu in reading.gpus] == [0, 1, 3]
    assert reading.notes == ["NVML could not open GPU 2"]
    assert reading.topo is not None and reading.topo.columns == ["GPU0", "GPU1", "GPU3"]
