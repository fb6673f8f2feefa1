"""Expert-parallel transports and kernels (data/moe_transports.yaml): which kernel runs on which transport, which
fabric each transport needs, and what each charges per remote peer and per message.

    facts = moe_transport_facts()
    kernel = facts.kernel("low-latency")        # the alias resolves to deepep-ll
    facts.transports["efa"].per_peer_us

A malformed file is a DataError naming the field: an unknown transport in a kernel's list, a duplicate alias.
"""

from __future__ import annotations

import functools
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import DATA_DIR, read_yaml
from linkscope.hardware.system import FABRICS

MOE_TRANSPORTS_FILE = DATA_DIR / "moe_transports.yaml"
TRANSPORTS = ("ibgda", "proxy", "efa", "nvlink")
AUTO = "auto"
KernelStyle = Literal["normal", "low-latency", "nccl"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class TransportFacts(_Strict):
    """One transport: the fabrics it runs on and its costs beyond the bytes."""

    description: str
    fabrics: list[str]
    needs_gpudirect: bool
    max_nodes: int | None = Field(default=None, ge=1)
    per_peer_us: float = Field(ge=0)
    per_message_us: float = Field(ge=0)
    rdma_share: float = Field(gt=0, le=1)
    source: str
    as_of: date

    @model_validator(mode="after")
    def _known_fabrics(self) -> TransportFacts:
        unknown = [f for f in self.fabrics if f not in FABRICS]
        if unknown:
            raise ValueError(f"unknown fabric '{unknown[0]}' (known: {', '.join(FABRICS)})")
        return self


class KernelFacts(_Strict):
    """One expert-parallel kernel: the cost model it follows, its old names, and the transports it runs on."""

    style: KernelStyle
    aliases: list[str] = []
    fallback: str | None = None
    """The kernel with the same interface a training or serving job runs where this one cannot."""
    needs_rdma: bool
    transports: list[str]
    refused: dict[str, str] = {}
    """Why the kernel cannot run on a transport it does not list, per transport."""
    source: str
    as_of: date


class MoeTransportFile(_Strict):
    """data/moe_transports.yaml."""

    source: str
    as_of: date
    transports: dict[str, TransportFacts]
    kernels: dict[str, KernelFacts]

    @model_validator(mode="after")
    def _consistent(self) -> MoeTransportFile:
        if set(self.transports) != set(TRANSPORTS):
            raise ValueError(f"transports must be exactly {', '.join(TRANSPORTS)}")
        names: set[str] = set()
        for name, kernel in self.kernels.items():
            if kernel.fallback is not None and kernel.fallback not in self.kernels:
                raise ValueError(f"kernel {name}: unknown fallback '{kernel.fallback}'")
            for t in [*kernel.transports, *kernel.refused]:
                if t not in TRANSPORTS:
                    raise ValueError(f"kernel {name}: unknown transport '{t}'")
            for alias in [name, *kernel.aliases]:
                if alias in names:
                    raise ValueError(f"kernel name or alias '{alias}' is given twice")
                names.add(alias)
        return self

    def kernel_name(self, name: str) -> str:
        """The kernel's canonical name (an alias such as `low-latency` gives `deepep-ll`); a UserError naming the
        known ones otherwise."""
        for canonical, kernel in self.kernels.items():
            if name == canonical or name in kernel.aliases:
                return canonical
        raise UserError(f"must be one of {', '.join(self.all_kernel_names())} (got '{name}')", field="kernel")

    def kernel(self, name: str) -> KernelFacts:
        """The kernel called `name` or one of its aliases."""
        return self.kernels[self.kernel_name(name)]

    def all_kernel_names(self) -> tuple[str, ...]:
        """Canonical names, then the aliases kept from earlier releases."""
        return (*self.kernels, *(a for k in self.kernels.values() for a in k.aliases))


@functools.cache
def moe_transport_facts() -> MoeTransportFile:
    """data/moe_transports.yaml, validated once."""
    try:
        return MoeTransportFile.model_validate(read_yaml(MOE_TRANSPORTS_FILE))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DataError(str(MOE_TRANSPORTS_FILE), err["msg"], field=".".join(map(str, err["loc"]))) from None
