"""Printing what the data-parallel knobs cost and save (`predict train`, `plan`, `advise train`)."""

from __future__ import annotations

from typing import Any

from linkscope.cli.common import console


def print_knob_effect(effect: dict[str, Any] | None) -> None:
    """The knobs' sentences under a table, when any knob is in force."""
    if not effect:
        return
    from linkscope.model.step.knob_effect import KnobEffect

    for line in KnobEffect(**effect).sentences():
        console.print(line, highlight=False, markup=False, soft_wrap=True)
