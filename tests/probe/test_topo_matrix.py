"""`nvidia-smi topo -m`: current and older layouts, ANSI headers, NIC legends, and malformed input."""

from __future__ import annotations

from linkscope.probe.topo_matrix import parse_topo_matrix, pcie_level
from tests.probe.fixtures import fixture_text


def test_hgx_h100_matrix_has_eight_gpus_on_nv18_and_two_nics() -> None:
    topo = parse_topo_matrix(fixture_text("topo_hgx_h100.txt"))
    assert topo.problems == []
    assert topo.gpus == [f"GPU{i}" for i in range(8)]
    assert topo.nics == ["NIC0", "NIC1"]
    assert all(topo.nvlinks_between(f"GPU{a}", f"GPU{b}") == 18 for a in range(8) for b in range(8) if a != b)
    assert topo.cell("GPU0", "NIC0") == "PIX" and topo.cell("GPU0", "NIC1") == "SYS"


def test_hgx_h100_matrix_reads_legend_and_affinity_columns() -> None:
    topo = parse_topo_matrix(fixture_text("topo_hgx_h100.txt"))
    assert topo.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert topo.nic_device("NIC1") == "mlx5_1"
    assert topo.affinity["GPU0"] == {"CPU Affinity": "0-47,96-143", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}
    assert topo.gpu_numa_affinity("GPU0") == 0 and topo.gpu_numa_affinity("GPU7") == 1
    assert "NIC0" not in topo.affinity  # NIC rows end after the device cells


def test_old_layout_names_nics_in_the_header_and_has_no_nic_legend() -> None:
    topo = parse_topo_matrix(fixture_text("topo_dgx1_v100.txt"))
    assert topo.problems == []
    assert topo.nics == ["mlx5_2", "mlx5_0", "mlx5_3", "mlx5_1"]
    assert topo.nic_names == {}
    assert topo.nic_device("mlx5_0") == "mlx5_0"
    assert topo.nvlinks_between("GPU0", "GPU3") == 2
    assert topo.nvlinks_between("GPU0", "GPU1") == 1
    assert topo.nvlinks_between("GPU0", "GPU5") == 0
    assert topo.affinity["GPU4"] == {"CPU Affinity": "20-39,60-79"}


def test_dgx1_hybrid_cube_mesh_gives_every_gpu_six_links() -> None:
    topo = parse_topo_matrix(fixture_text("topo_dgx1_v100.txt"))
    for gpu in topo.gpus:
        assert sum(topo.nvlinks_between(gpu, peer) for peer in topo.gpus if peer != gpu) == 6


def test_tab_separated_header_with_ansi_underline() -> None:
    # nvidia-smi writes tabs and underlines the header; the row is the HGX H100 row format of the reference.
    text = ("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \tNV18\tPIX\t0-47,96-143\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tNODE\t0-47,96-143\t0\t\tN/A\n"
            "NIC0\tPIX\tNODE\t X \n")
    topo = parse_topo_matrix(text)
    assert topo.problems == []
    assert topo.columns == ["GPU0", "GPU1", "NIC0"]
    assert topo.nvlinks_between("GPU1", "GPU0") == 18
    assert topo.affinity["GPU1"]["GPU NUMA ID"] == "N/A"


def test_short_row_and_unknown_cell_are_problems_with_line_numbers() -> None:
    text = ("        GPU0    GPU1    GPU2    CPU Affinity\n"
            "GPU0     X      NV12    NV12    0-31\n"
            "GPU1    NV12     X\n"
            "GPU2    NV12    QPX      X      0-31\n")
    topo = parse_topo_matrix(text)
    messages = {(p.line, p.message) for p in topo.problems}
    assert (3, "row GPU1 has 2 cells, expected 3") in messages
    assert (4, "unknown connection 'QPX' (GPU2-GPU1)") in messages
    assert topo.cell("GPU0", "GPU2") == "NV12"  # what could be read is kept


def test_missing_rows_and_stray_lines_are_reported() -> None:
    text = "        GPU0    GPU1\nGPU0     X      PHB\nsomething else entirely\n"
    topo = parse_topo_matrix(text)
    assert [p.message for p in topo.problems] == ["unexpected line in the matrix", "no row for GPU1"]
    assert topo.problems[0].line == 3


def test_driver_error_text_gives_a_problem_not_an_exception() -> None:
    text = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n")
    topo = parse_topo_matrix(text)
    assert topo.columns == [] and topo.gpus == []
    assert "no matrix header" in topo.problems[0].message


def test_pcie_level_reads_pcie_paths_and_not_nvlink() -> None:
    assert pcie_level("PIX") == "PIX"
    assert pcie_level("SOC") == "SYS"
    assert pcie_level("NV18") is None
    assert pcie_level(None) is None
