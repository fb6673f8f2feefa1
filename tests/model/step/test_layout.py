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


def _exact_nodes(sizes: dict[str, int], order: tuple[str, ...], gpus_per_node: int, group: str,
                 ep: int = 1, etp: int = 1) -> int:
    """The most nodes one group spans, by numbering every rank: dims in `order` (fastest first), node-major; the
    experts fold into each pipeline stage's other ranks, in rank order, etp fastest, then ep, then edp."""
    import itertools

    ranks = {}
    for digits in itertools.product(*(range(sizes[d]) for d in reversed(order))):
        coords = dict(zip(reversed(order), digits))
        rank, stride = 0, 1
        for d in order:
            rank, stride = rank + coords[d] * stride, stride * sizes[d]
        ranks[rank] = coords
    groups: dict[tuple[int, ...], set[int]] = {}
    if group in ("ep", "edp"):
        for stage in range(sizes["pp"]):
            members = sorted(r for r, c in ranks.items() if c["pp"] == stage)
            for index, rank in enumerate(members):
                e_tp, rest = index % etp, index // etp
                key = (stage, e_tp, rest // ep) if group == "ep" else (stage, e_tp, rest % ep)
                groups.setdefault(key, set()).add(rank // gpus_per_node)
    else:
        varying = {"dp": ("dp", "cp")}.get(group, (group,))
        for rank, c in ranks.items():
            key = tuple(c[d] for d in order if d not in varying)
            groups.setdefault(key, set()).add(rank // gpus_per_node)
    return max(len(nodes) for nodes in groups.values())


@pytest.mark.parametrize("tp, cp, pp, dp, ep, etp", [
    (1, 1, 4, 8, 8, 1), (2, 1, 2, 8, 4, 2), (4, 2, 2, 2, 8, 1), (8, 1, 2, 2, 16, 1), (1, 2, 8, 2, 2, 1),
    (2, 2, 1, 8, 32, 1), (1, 1, 2, 16, 4, 1),
])
def test_order_spans_match_a_rank_by_rank_placement(tp: int, cp: int, pp: int, dp: int, ep: int, etp: int) -> None:
    # Every rank order puts every group (experts folded into each stage's ranks too) on the nodes that numbering
    # the ranks one by one gives: the step model's spans are exact where the sizes divide the node.
    import itertools

    from linkscope.model.step.layout import order_spans, single_layout

    sizes = {"tp": tp, "cp": cp, "pp": pp, "dp": dp}
    lay = single_layout(tp, pp, dp, cp, ep=ep, etp=etp)
    for order in itertools.permutations(("tp", "cp", "dp", "pp")):
        spans = order_spans(lay, 8, order)
        for group in ("tp", "cp", "dp", "ep", "edp"):
            expected = _exact_nodes(sizes, order, 8, group, ep, etp)
            assert int(spans[group][1][0]) == expected, (order, group)


def test_order_spans_of_megatrons_order_are_the_strided_spans() -> None:
    from linkscope.model.step.layout import group_span, order_spans
    from linkscope.model.step.search import LayoutRequest, enumerate_layouts
    from linkscope.hardware.loader import load_db
    from linkscope.model.step.job import Job
    from linkscope.model.step.transformer import load_model

    # 24 GPUs on 8-GPU nodes: sizes of 3 and 6 that do not divide a node take group_span's rounding too.
    system = load_db([]).systems["dgx-h100"].with_gpus(24)
    lay = enumerate_layouts(Job(load_model("gpt3-175b"), 96, 2048), system, LayoutRequest(cp=None))
    spans = order_spans(lay, 8)
    strides = {"tp": (lay.tp, 1), "cp": (lay.cp, lay.tp), "dp": (lay.dp * lay.cp, lay.tp),
               "pp": (2, lay.tp * lay.cp * lay.dp)}
    for group, (size, stride) in strides.items():
        per_node, nodes = group_span(size, stride, 8)
        assert (spans[group][0] == per_node).all() and (spans[group][1] == nodes).all(), group
