"""The one layout type: validated when made, the same JSON everywhere."""

from __future__ import annotations

import pytest

from linkscope.model.step.layout import Layout, layouts_of


def test_a_layout_knows_its_world_and_its_json() -> None:
    layout = Layout(tp=8, pp=4, dp=2, cp=2, interleave=3, micro_batch=2, recompute="full", zero=1,
                    sequence_parallel=True)
    assert layout.world == 128 and layout.degree("pp") == 4
    assert layout.as_dict() == {"tp": 8, "pp": 4, "dp": 2, "cp": 2, "interleave": 3, "micro_batch": 2,
                                "recompute": "full", "zero": 1, "sequence_parallel": True, "ep": 1, "etp": 1}
    assert layouts_of(layout).row(0) == layout


@pytest.mark.parametrize("kwargs, needle", [
    ({"tp": 0}, "tp must be at least 1"), ({"micro_batch": 0}, "micro_batch must be at least 1"),
    ({"recompute": "some"}, "recompute must be one of"), ({"zero": 4}, "zero must be 0, 1, 2 or 3"),
])
def test_an_impossible_layout_cannot_be_made(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Layout(**{"tp": 1, "pp": 1, "dp": 1, **kwargs})
