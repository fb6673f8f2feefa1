"""Rank layout: torchrun's environment, nodes, and the intra-/inter-node groups."""

from __future__ import annotations

from linkscope.bench.layout import RankEnv, RankInfo, distinct_hosts, node_count, rank_groups, torchrun_env


def _info(rank: int, local: int, node: int | None, host: str) -> RankInfo:
    return RankInfo(rank, local, node, host, 1000 + rank, local, "cpu", "CPU")


def test_torchrun_env_is_read_from_its_variables() -> None:
    env = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
           "MASTER_ADDR": "10.0.0.1"}
    assert torchrun_env(env) == RankEnv(rank=5, world=8, local_rank=1, local_world=4, node_rank=1)


def test_no_torchrun_env_without_its_variables() -> None:
    assert torchrun_env({"RANK": "0"}) is None
    assert torchrun_env({}) is None


def test_two_nodes_of_two_ranks_give_intra_and_inter_node_groups() -> None:
    infos = [_info(0, 0, 0, "a"), _info(1, 1, 0, "a"), _info(2, 0, 1, "b"), _info(3, 1, 1, "b")]
    groups = rank_groups(infos)
    assert groups["intra_node"] == [[0, 1], [2, 3]]
    assert groups["inter_node"] == [[0, 2], [1, 3]]
    assert groups["hosts"] == ["a", "a", "b", "b"]
    assert groups["ranks"][2]["pid"] == 1002
    assert node_count(infos) == 2
    assert distinct_hosts(infos) == ["a", "b"]


def test_nodes_on_one_host_are_told_apart_by_group_rank() -> None:
    infos = [_info(0, 0, 0, "vm"), _info(1, 0, 1, "vm")]
    assert node_count(infos) == 2
    assert rank_groups(infos)["intra_node"] == [[0], [1]]


def test_without_group_rank_nodes_are_hosts() -> None:
    infos = [_info(0, 0, None, "a"), _info(1, 1, None, "a"), _info(2, 0, None, "b")]
    assert node_count(infos) == 2
    assert rank_groups(infos)["inter_node"] == [[0, 2], [1]]
