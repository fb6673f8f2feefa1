"""The live machine as a System (NVML or nvidia-smi, sysfs for PCIe, InfiniBand and NUMA) and NCCL log reading.

Entry points:
- `probe_machine()` reads this machine into a `MachineProbe`; `to_system(probe)` turns it into a System.
- `analyse_nccl_log(text, expect)` / `read_nccl_log(path, expect)` judge the transports of an NCCL_DEBUG=INFO log;
  `Expectations.from_system(system)` says what a System should give NCCL.
"""

from linkscope.probe.machine import MachineProbe, ProbePaths, probe_machine
from linkscope.probe.nccl_findings import Expectations, Finding
from linkscope.probe.nccl_log import NcclLogReport, analyse_nccl_log, read_nccl_log
from linkscope.probe.to_system import ProbedSystem, to_system

__all__ = [
    "Expectations", "Finding", "MachineProbe", "NcclLogReport", "ProbePaths", "ProbedSystem", "analyse_nccl_log",
    "probe_machine", "read_nccl_log", "to_system",
]
