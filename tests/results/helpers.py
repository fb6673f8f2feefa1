"""Paths to the nccl-tests fixtures (real outputs; see tests/fixtures/nccl_tests/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

NCCL_TESTS = Path(__file__).resolve().parent.parent / "fixtures" / "nccl_tests"

PRE_2_13 = NCCL_TESTS / "pre2.13_all_reduce_a10g_2nodes.txt"
V2_13 = NCCL_TESTS / "v2.13_all_reduce_h100_2x8.txt"
V2_13_JSON = NCCL_TESTS / "v2.13_all_reduce_h100_2x8.json"
V2_17_CUT = NCCL_TESTS / "v2.17_all_gather_gb10_cut.txt"
CONCATENATED = NCCL_TESTS / "concatenated_2080ti_2gpu.txt"
MALFORMED = NCCL_TESTS / "malformed_from_v2.13.txt"
