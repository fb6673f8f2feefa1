"""linkscope: measure GPU interconnects, check what a machine delivers, predict and plan multi-GPU jobs."""

__version__ = "0.1.0"
