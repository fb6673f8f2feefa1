"""Element types as nccl-tests names them, with what the correctness check needs to know about each.

Torch-free on purpose: the command line validates `-d` before paying for `import torch`.
"""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.hardware.errors import UserError


@dataclass(frozen=True)
class DType:
    """One element type.

    `exact_int_limit` is the largest integer N such that every integer in [0, N] is exactly
    representable and no sum staying below N overflows; `prod_exp_limit` is the largest k such that
    2**k is representable. The correctness check keeps every partial result inside these bounds, so
    the expected output is exact whatever order the library reduces in.
    """

    name: str
    """nccl-tests' `typeName` (printed in the `type` column)."""
    torch_name: str
    """Attribute of the `torch` module."""
    size_bytes: int
    is_float: bool
    exact_int_limit: int
    prod_exp_limit: int


# Integer limits are capped at 2**20: check values never need more, and the cap keeps every
# intermediate well inside int64 and float64.
_CAP = 2**20

DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("int8", "int8", 1, False, 127, 6),
        DType("uint8", "uint8", 1, False, 255, 7),
        DType("int32", "int32", 4, False, _CAP, 30),
        DType("int64", "int64", 8, False, _CAP, 62),
        DType("half", "float16", 2, True, 2048, 15),
        DType("float", "float32", 4, True, _CAP, 127),
        DType("double", "float64", 8, True, _CAP, 1023),
        DType("bfloat16", "bfloat16", 2, True, 256, 127),
    )
}

_ALIASES = {
    "float16": "half",
    "fp16": "half",
    "float32": "float",
    "fp32": "float",
    "float64": "double",
    "fp64": "double",
    "bf16": "bfloat16",
}


def dtype_by_name(name: str) -> DType:
    """Look up a type by nccl-tests name or torch-style alias (`float32`, `float16`, `bf16`, ...)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPES:
        known = ", ".join(list(DTYPES) + list(_ALIASES))
        raise UserError(f"unknown data type '{name}'; choose one of: {known}")
    return DTYPES[key]


REDOPS: tuple[str, ...] = ("sum", "prod", "min", "max", "avg")
"""Reduction operators, spelt as nccl-tests' `opName`."""


def check_redop(name: str) -> str:
    """Validate a `-o` value and return it lower-cased."""
    key = name.strip().lower()
    if key not in REDOPS:
        raise UserError(f"unknown reduction operator '{name}'; choose one of: {', '.join(REDOPS)}")
    return key
