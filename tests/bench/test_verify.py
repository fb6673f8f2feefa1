"""Check data is exactly predictable: any reduction order gives the expected values bit for bit."""

from __future__ import annotations

import pytest
import torch

from linkscope.bench.dtypes import DTYPES, DType
from linkscope.bench.sizes import coll_counts
from linkscope.bench.verify import CheckData, count_wrong, expected_output, input_values

CPU = torch.device("cpu")
COUNT = 4096


def _typed(dt: DType, values: torch.Tensor) -> torch.Tensor:
    return values.to(getattr(torch, dt.torch_name))


def _reduce(redop: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    """Reduce in the element type itself, as a library would."""
    acc = tensors[0].clone()
    for t in tensors[1:]:
        if redop in ("sum", "avg"):
            acc = acc + t
        elif redop == "prod":
            acc = acc * t
        elif redop == "min":
            acc = torch.minimum(acc, t)
        else:
            acc = torch.maximum(acc, t)
    return acc


def _tree(redop: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    while len(tensors) > 1:
        pairs = [tensors[i : i + 2] for i in range(0, len(tensors), 2)]
        tensors = [_reduce(redop, p) for p in pairs]
    return tensors[0]


CASES = [(dt, op, n) for dt in DTYPES for op in ("sum", "prod", "min", "max") for n in (2, 3, 8)]


@pytest.mark.parametrize(("dtype", "redop", "world"), CASES)
def test_reductions_are_exact_in_any_order(dtype: str, redop: str, world: int) -> None:
    dt = DTYPES[dtype]
    data = CheckData(world, redop, dt, seed=1, device=CPU)
    inputs = [_typed(dt, data.values(r, 0, COUNT)) for r in range(world)]
    expected = data.reduced(0, COUNT)
    for result in (_reduce(redop, inputs), _reduce(redop, inputs[::-1]), _tree(redop, inputs)):
        assert count_wrong(result, expected) == 0


@pytest.mark.parametrize("dtype", [d for d in DTYPES if DTYPES[d].is_float])
@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_average_is_the_exact_base_value(dtype: str, world: int) -> None:
    dt = DTYPES[dtype]
    data = CheckData(world, "avg", dt, seed=2, device=CPU)
    inputs = [_typed(dt, data.values(r, 0, COUNT)) for r in range(world)]
    summed = _reduce("sum", inputs)
    assert count_wrong(summed / world, data.reduced(0, COUNT)) == 0
    assert data.reduced(0, COUNT).abs().sum() > 0, "the check must not degenerate to zeros"


def test_values_vary_with_rank_element_and_seed() -> None:
    dt = DTYPES["float"]
    a = CheckData(4, "sum", dt, seed=1, device=CPU)
    b = CheckData(4, "sum", dt, seed=2, device=CPU)
    assert not torch.equal(a.values(0, 0, 256), a.values(1, 0, 256))
    assert not torch.equal(a.values(0, 0, 256), b.values(0, 0, 256))
    assert len(set(a.values(0, 0, 256).tolist())) > 10


@pytest.mark.parametrize(("dtype", "world"), [("bfloat16", 300), ("int8", 200), ("half", 3000)])
def test_more_ranks_than_exact_integers_still_sum_exactly(dtype: str, world: int) -> None:
    dt = DTYPES[dtype]
    data = CheckData(world, "sum", dt, seed=1, device=CPU)
    inputs = [_typed(dt, data.values(r, 0, 512)) for r in range(world)]
    expected = data.reduced(0, 512)
    assert expected.max() <= dt.exact_int_limit
    assert count_wrong(_reduce("sum", inputs), expected) == 0


def test_prod_stays_within_the_exponent_range() -> None:
    dt = DTYPES["half"]
    data = CheckData(64, "prod", dt, seed=1, device=CPU)
    assert data.reduced(0, COUNT).max() <= 2**dt.prod_exp_limit


def _simulate(op: str, world: int, root: int, counts, data: CheckData) -> list[torch.Tensor | None]:
    """What each rank's output holds after `op`, written directly from the collective's definition."""
    ins = [input_values(op, r, counts, data) for r in range(world)]
    base = counts.param
    if op == "all_gather":
        return [torch.cat(ins)] * world
    if op == "gather":
        return [torch.cat(ins) if r == root else None for r in range(world)]
    if op == "reduce_scatter":
        total = sum(ins)
        return [total[r * base : (r + 1) * base] for r in range(world)]
    if op == "all_to_all":
        return [torch.cat([ins[s][r * base : (r + 1) * base] for s in range(world)]) for r in range(world)]
    if op == "scatter":
        return [ins[root][r * base : (r + 1) * base] for r in range(world)]
    if op == "broadcast":
        return [ins[root]] * world
    if op == "sendrecv":
        return [ins[(r - 1) % world] for r in range(world)]
    total = sum(ins)
    return [total] * world if op == "all_reduce" else [total if r == root else None for r in range(world)]


@pytest.mark.parametrize("op", ["all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all",
                                "gather", "scatter", "sendrecv"])
def test_expected_outputs_follow_each_collectives_definition(op: str) -> None:
    world, root = 3, 1
    kind = {"all_gather": "gather", "gather": "gather", "reduce_scatter": "scatter", "scatter": "scatter",
            "all_to_all": "alltoall"}.get(op, "same")
    counts = coll_counts(kind, 4800, 4, world)
    redop = "sum" if op in ("all_reduce", "reduce", "reduce_scatter") else "none"
    data = CheckData(world, redop, DTYPES["float"], seed=3, device=CPU)
    for rank, out in enumerate(_simulate(op, world, root, counts, data)):
        if out is not None:
            assert torch.equal(expected_output(op, rank, root, counts, data), out)


def test_count_wrong_counts_each_differing_element() -> None:
    expected = torch.arange(10, dtype=torch.float64)
    actual = expected.to(torch.float32)
    actual[3] = -1
    actual[7] = 100
    assert count_wrong(actual, expected) == 2
    with pytest.raises(ValueError, match="elements"):
        count_wrong(actual[:5], expected)
