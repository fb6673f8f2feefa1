"""The bulk search gives the same answer as `model.search.search` on each System, one at a time."""

from __future__ import annotations

import numpy as np
import pytest

from linkscope.advise.engine import LayoutPool, evaluate_node_type
from linkscope.hardware.loader import load_db
from linkscope.model.step.search import LayoutRequest, search
from linkscope.model.comm.tiers import comm_tiers
from linkscope.model.step.job import Job
from linkscope.model.step.transformer import load_model


@pytest.mark.parametrize(("model", "offering"), [("llama2-7b", "aws/p5.48xlarge"),
                                                 ("llama2-13b", "gcp/a2-highgpu-8g")])
def test_batched_node_counts_match_one_search_per_system(model: str, offering: str) -> None:
    system = load_db([]).offerings[offering].system
    job = Job(load_model(model), global_batch=64, seq_len=2048)
    pool = LayoutPool(job, LayoutRequest())
    result = evaluate_node_type(pool, system, [1, 2, 4], comm_tiers(system))
    assert result.search is not None
    for nodes in (1, 2, 4):
        alone = search(job, system.with_nodes(nodes), LayoutRequest())
        best = result.counts[nodes].best
        assert best is not None
        assert result.search.layouts.row(best) == alone.layouts.row(alone.best)
        assert float(result.search.estimate.step_time_s[best]) == pytest.approx(
            float(alone.estimate.step_time_s[alone.best]), rel=1e-9)


def test_nothing_priced_when_nothing_fits_and_the_least_memory_is_reported() -> None:
    system = load_db([]).offerings["lambda/gpu_8x_a100"].system
    job = Job(load_model("megatron-1t"), global_batch=64, seq_len=2048)
    result = evaluate_node_type(LayoutPool(job, LayoutRequest()), system, [1], comm_tiers(system))
    assert result.search is None and result.priced == 0
    count = result.counts[1]
    assert count.best is None and count.min_memory_gib is not None
    assert count.min_memory_gib > system.node.gpu.memory_gib


def test_pool_reuses_enumerations_across_node_types_of_equal_size() -> None:
    db = load_db([])
    job = Job(load_model("llama2-7b"), global_batch=32, seq_len=2048)
    pool = LayoutPool(job, LayoutRequest())
    a, _ = pool.get(db.offerings["aws/p5.48xlarge"].system.with_nodes(2))
    b, _ = pool.get(db.offerings["azure/Standard_ND96amsr_A100_v4"].system.with_nodes(2))
    assert a is b
    assert np.all(a.tp * a.pp * a.dp * a.cp == 16)
