"""Specs and Systems: GPUs, link generations, presets and the offering catalog. Imports nothing of linkscope."""

from linkscope.hardware.errors import DataError, UserError
from linkscope.hardware.loader import HardwareDB, load_db
from linkscope.hardware.offering import Offering
from linkscope.hardware.specs import GpuSpec, LinkSpec
from linkscope.hardware.system import NodeSpec, ScaleOut, ScaleUp, System

__all__ = [
    "DataError", "GpuSpec", "HardwareDB", "LinkSpec", "NodeSpec", "Offering", "ScaleOut", "ScaleUp", "System",
    "UserError", "load_db",
]
