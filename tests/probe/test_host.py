"""Host facts: CPU model, vendor and sockets from /proc/cpuinfo, NUMA nodes, memory."""

from __future__ import annotations

from linkscope.probe.host import parse_cpuinfo, read_host, read_numa_nodes
from tests.probe.fixtures import HGX_TREE, tree_paths


def test_intel_cpuinfo_gives_model_vendor_sockets_and_cpus() -> None:
    text = (HGX_TREE / "proc" / "cpuinfo").read_text()
    assert parse_cpuinfo(text) == ("Intel(R) Xeon(R) Platinum 8462Y+", "intel", 2, 4)


def test_arm_cpuinfo_has_no_vendor_id_but_an_implementer() -> None:
    text = "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\n\n" \
           "processor\t: 1\nCPU implementer\t: 0x41\n"
    model, vendor, sockets, logical = parse_cpuinfo(text)
    assert (model, vendor, sockets, logical) == (None, "arm", None, 2)


def test_amd_vendor_and_empty_text() -> None:
    assert parse_cpuinfo("vendor_id : AuthenticAMD\nmodel name : AMD EPYC 9654\n")[:2] == ("AMD EPYC 9654", "amd")
    assert parse_cpuinfo("") == (None, None, None, 0)


def test_numa_nodes_with_cpu_lists_and_memory() -> None:
    nodes = read_numa_nodes(HGX_TREE / "devices" / "system" / "node")
    assert [(n.id, n.cpulist) for n in nodes] == [(0, "0-47,96-143"), (1, "48-95,144-191")]
    assert nodes[0].memory_gib == 1007.4


def test_read_host_from_a_fixture_tree() -> None:
    host = read_host(tree_paths().host)
    assert host.cpu_vendor == "intel" and host.cpu_sockets == 2 and host.logical_cpus == 4
    assert host.memory_gib == 2015.41
    assert len(host.numa_nodes) == 2
    assert host.hostname  # the live hostname: the fixture tree has none
