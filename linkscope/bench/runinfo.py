"""The metadata stored with every run: versions, the NCCL environment, the options and the probed System."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from dataclasses import asdict
from typing import Any

import torch

from linkscope import __version__
from linkscope.bench.config import BenchConfig, P2PConfig
from linkscope.bench.kv.config import KvConfig
from linkscope.bench.moe.config import MoeConfig
from linkscope.bench.train.config import TrainConfig
from linkscope.results.database import redact_text, redact_values
from linkscope.results.records import RunInfo, RunKind


def versions() -> dict[str, str]:
    """torch, NCCL, CUDA, driver, python and linkscope versions, where known."""
    out = {"torch": torch.__version__, "python": platform.python_version(), "linkscope": __version__}
    if torch.version.cuda:
        out["cuda"] = torch.version.cuda
    nccl = _nccl_version()
    if nccl:
        out["nccl"] = nccl
    driver = _driver_version()
    if driver:
        out["driver"] = driver
    return out


def _nccl_version() -> str | None:
    if not (torch.version.cuda and torch.distributed.is_nccl_available()):
        return None
    try:
        version = torch.cuda.nccl.version()
    except (RuntimeError, AttributeError):
        return None
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)


def _driver_version() -> str | None:
    # The kernel module states it without needing NVML: "NVRM version: ... Kernel Module  550.54.15 ..."
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
    except OSError:
        return None
    words = first.split()
    for i, word in enumerate(words[:-1]):
        if word == "Module":
            return words[i + 1]
    return None


def nccl_env() -> dict[str, str]:
    """Every NCCL_* variable the user set (they change what NCCL does, so they belong with the numbers)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}


def config_dict(kind: str, cfg: BenchConfig | P2PConfig | TrainConfig | MoeConfig | KvConfig,
                nproc: int) -> dict[str, Any]:
    """The run's options, with nccl-tests' names added where nccl-tests has the same option."""
    data = asdict(cfg)
    data["run"]["nproc"] = nproc
    if kind == "bench":
        assert isinstance(cfg, BenchConfig)
        data.update(nthreads=1, ngpus=1, warmup_iters=cfg.warmup, agg_iters=1, validation=cfg.check,
                    graph=cfg.cudagraph, ops=list(cfg.ops))
    return data


def _probed_system() -> dict[str, Any] | None:
    """The System of this machine as `linkscope.probe` reads it, or None where it cannot say."""
    from linkscope.hardware.serialize import system_dict
    from linkscope.probe import probe_machine, to_system

    try:
        probed = to_system(probe_machine())
    except Exception:  # a failed probe must never cost the measurement
        return None
    return None if probed.system is None else system_dict(probed.system)


def probed_system() -> dict[str, Any] | None:
    """This machine's System as stored with runs (`system_dict` form), or None where the probe cannot say."""
    return _probed_system()


def build_run_info(kind: RunKind, cfg: BenchConfig | P2PConfig | TrainConfig | MoeConfig | KvConfig,
                   backend: str, nproc: int) -> RunInfo:
    """A new run's metadata; the layout (hosts, groups, nodes) is filled in once the ranks report."""
    return RunInfo(
        kind=kind,
        label=cfg.run.label,
        world_size=nproc,
        backend=backend,
        versions=versions(),
        nccl_env=nccl_env(),
        system=_probed_system(),
        config=redact_values(config_dict(kind, cfg, nproc)),
        command=redact_text(shlex.join(sys.argv)),
    )
