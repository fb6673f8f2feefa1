"""What launchers need to reproduce a placement: a hostfile with slots, per-node CUDA_VISIBLE_DEVICES, the
torchrun command per node, and Megatron-LM's parallel sizes with the rank order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from linkscope.advise.placement import Placement
from linkscope.hardware.errors import UserError

MASTER_PORT = 29500


@dataclass
class LaunchPlan:
    """Launcher inputs for one placement."""

    hosts: list[str]
    hostfile: str
    cuda_visible_devices: dict[str, str]
    torchrun: list[str]
    megatron_args: str
    order: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dict(self.__dict__)


def host_names(hosts: str | None, nodes: int) -> list[str]:
    """`--hosts a,b,c` (one per node), or node0..nodeN-1 as placeholders."""
    if not hosts:
        return [f"node{i}" for i in range(nodes)]
    names = [h.strip() for h in hosts.split(",") if h.strip()]
    if len(names) != nodes:
        raise UserError(f"{len(names)} names for {nodes} nodes", field="hosts")
    return names


def cuda_visible_devices(p: Placement) -> list[str]:
    """Per node: the physical GPU of each local rank, in local-rank order."""
    gpn = p.system.node.gpus
    return [",".join(str(int(p.gpu[n * gpn + i])) for i in range(gpn)) for n in range(p.system.nodes)]


def launch_plan(p: Placement, hosts: list[str], script: str = "train.py") -> LaunchPlan:
    """Hostfile, CUDA_VISIBLE_DEVICES, torchrun lines and Megatron arguments for placement `p`."""
    gpn, nodes = p.system.node.gpus, p.system.nodes
    devices = cuda_visible_devices(p)
    torchrun = [f"CUDA_VISIBLE_DEVICES={devices[i]} torchrun --nnodes={nodes} --nproc-per-node={gpn} "
                f"--node-rank={i} --master-addr={hosts[0]} --master-port={MASTER_PORT} {script}"
                for i in range(nodes)]
    megatron = f"--tensor-model-parallel-size {p.par.tp} --pipeline-model-parallel-size {p.par.pp} " \
               f"--context-parallel-size {p.par.cp}"
    return LaunchPlan(hosts=hosts, hostfile="".join(f"{h} slots={gpn}\n" for h in hosts),
                      cuda_visible_devices=dict(zip(hosts, devices)), torchrun=torchrun,
                      megatron_args=megatron, order=p.order_text)
