"""A node and its NVLink domain apart: a domain across nodes holds whole nodes, no more GPUs than a System is
given, and fills evenly; a file that says otherwise is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import load_db, load_system_file
from linkscope.hardware.system import split_into_domains
from tests.cli.helpers import run_cli

TRAY = """\
gpu: GB200
gpus: 4
scale_up: {{kind: nvswitch, generation: nvlink5, domain_size: {domain}, in_network_reduction: nvls}}
scale_out: {{fabric: infiniband, generation: ib-ndr, nics: 4, nic_gbit_per_s: 400, gpudirect_rdma: true}}
{extra}source: "test"
as_of: 2026-11-01
"""


def _write(tmp_path: Path, domain: int, extra: str = "") -> Path:
    path = tmp_path / "tray.yaml"
    path.write_text(TRAY.format(domain=domain, extra=extra), encoding="utf-8")
    return path


@pytest.mark.parametrize("nodes, per_domain, expected", [
    (1, 18, (1, 1)), (18, 18, (1, 18)), (20, 18, (2, 10)), (36, 18, (2, 18)), (256, 18, (16, 16)), (9, 9, (1, 9)),
])
def test_nodes_spread_evenly_over_the_fewest_domains(nodes: int, per_domain: int, expected: tuple[int, int]) -> None:
    assert split_into_domains(nodes, per_domain) == expected


def test_a_spread_that_leaves_domains_less_than_half_full_is_refused() -> None:
    with pytest.raises(ValueError, match="76 GPUs .* do not spread evenly .* e.g. 72 or 144 GPUs"):
        split_into_domains(19, 18, 4)


def test_a_tray_file_describes_one_node_of_a_72_gpu_domain(tmp_path: Path) -> None:
    system = load_system_file(_write(tmp_path, 72), load_db(include_user=False))
    assert (system.gpus_per_node, system.nvlink_domain_gpus, system.domain_spans_nodes) == (4, 72, True)
    racked = load_system_file(_write(tmp_path, 72, "nodes: 36\n"), load_db(include_user=False))
    assert racked.domain_split() == (2, 72)


@pytest.mark.parametrize("domain, extra, problem", [
    (2, "", "scale_up.domain_size 2 is smaller than the node's 4 GPUs"),
    (6, "", "scale_up.domain_size 6 is not a multiple of the node's 4 GPUs"),
    (72, "nodes: 2\n", "scale_up.domain_size 72 is larger than the 8 GPUs of its 2 node(s)"),
    (72, "nodes: 19\n", "76 GPUs (19 nodes of 4) do not spread evenly over NVLink domains of 72 GPUs"),
])
def test_a_domain_that_does_not_fit_its_nodes_is_one_line_and_exit_2(tmp_path: Path, domain: int, extra: str,
                                                                      problem: str) -> None:
    path = _write(tmp_path, domain, extra)
    with pytest.raises(DataError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load_system_file(path, load_db(include_user=False))
    result = run_cli("predict", "collective", "-s", str(path), "--bytes", "1M")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0] and "Traceback" not in result.stderr


def test_whole_domain_booking_is_refused_where_the_domain_does_not_span_nodes(tmp_path: Path) -> None:
    catalog = tmp_path / "mine.yaml"
    catalog.write_text("""\
provider: mine
offerings:
  - instance: hgx
    gpu: B200-SXM-180GB
    gpus: 8
    scale_up: {kind: nvswitch}
    books_whole_domain: true
    source: "test"
    as_of: 2026-11-01
""", encoding="utf-8")
    with pytest.raises(DataError, match="books_whole_domain applies only to an NVLink domain that spans nodes"):
        load_db([catalog], include_user=False)


def test_the_offerings_as_sold_keep_their_node_and_say_how_domains_are_booked() -> None:
    db = load_db(include_user=False)
    for oid, whole in (("coreweave/gb200-4x", True), ("aws/p6e-gb200-ultraserver", True),
                       ("gcp/a4x-highgpu-4g", None), ("azure/Standard_ND128isr_NDR_GB200_v6", None),
                       ("oci/BM.GPU.GB200.4", None)):
        offering = db.offerings[oid]
        assert (offering.system.gpus_per_node, offering.system.nvlink_domain_gpus) == (4, 72), oid
        assert offering.books_whole_domain is whole, oid
    assert db.offerings["oci/BM.GPU.GB200.4"].price_per_gpu_hour == 16.0



def test_the_catalog_says_how_a_domain_across_nodes_is_booked() -> None:
    import json

    from rich.console import Console

    from linkscope.report.catalog import catalog_table

    rows = {r["id"]: r for r in json.loads(run_cli("catalog", "--gpu", "GB200", "--json").stdout)}
    assert rows["coreweave/gb200-4x"]["books_whole_domain"] is True
    assert rows["coreweave/gb200-4x"]["scale_up"]["domain_size"] == 72 and rows["coreweave/gb200-4x"]["gpus"] == 4
    assert rows["gcp/a4x-highgpu-4g"]["books_whole_domain"] is None
    offerings = load_db(include_user=False).offerings
    console = Console(width=250, record=True)
    console.print(catalog_table([offerings[k] for k in ("coreweave/gb200-4x", "gcp/a4x-highgpu-4g",
                                                         "coreweave/hgx-b200")], width=250))
    text = console.export_text()
    assert "domain 72, sold in whole domains" in text and "domain 72, booking unknown" in text
    # A node whose NVLink stays inside it says nothing of booking.
    hgx = next(line for line in text.splitlines() if "coreweave/hgx-b200" in line)
    assert "domain" not in hgx and "booking" not in hgx
