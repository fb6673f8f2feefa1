"""Constants in force: the packaged ones, or the candidates a fitting procedure tries inside a `with` block.

One owner for the override stack that the compute constants, the collective fit and the MoE constants share:
each module keeps its public `..._constants()` / `..._override()` pair and delegates here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class InForce(Generic[T]):
    """One set of constants: the innermost override, else what `packaged` loads."""

    def __init__(self, packaged: Callable[[], T]) -> None:
        self._packaged = packaged
        self._stack: list[T] = []

    def get(self) -> T:
        """The constants in force."""
        return self._stack[-1] if self._stack else self._packaged()

    @contextmanager
    def override(self, value: T) -> Iterator[None]:
        """`value` in force inside the block (nested blocks: the innermost wins)."""
        self._stack.append(value)
        try:
            yield
        finally:
            self._stack.pop()
