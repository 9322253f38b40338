"""map_shards without Ray: input order kept, shard failures named, both local pools."""

from __future__ import annotations

import time

import pytest

from marin.sharding import ShardFailed, map_shards, ray_available


def square_after(item: tuple[int, float]) -> int:
    value, delay = item
    time.sleep(delay)
    return value * value


def fail_on_three(value: int) -> int:
    if value == 3:
        raise ValueError(f"bad value {value}")
    return value


@pytest.mark.parametrize("local", ["thread", "process"])
def test_results_come_back_in_input_order_not_completion_order(local):
    items = [(i, 0.05 * (4 - i)) for i in range(5)]
    assert map_shards(square_after, items, local=local, max_workers=2, where="local") == [0, 1, 4, 9, 16]


def test_a_failing_shard_fails_the_map_naming_its_index_and_item():
    with pytest.raises(ShardFailed, match=r"shard 3 \(3\) failed: ValueError: bad value 3") as info:
        map_shards(fail_on_three, range(6), local="thread", where="local")
    assert info.value.index == 3


def test_empty_input_bad_pool_kind_and_bad_resources():
    assert map_shards(fail_on_three, []) == []
    with pytest.raises(ValueError, match="local must be 'process' or 'thread'"):
        map_shards(fail_on_three, [1], local="fork", where="local")
    with pytest.raises(ValueError, match="where must be 'auto', 'ray' or 'local'"):
        map_shards(fail_on_three, [1], where="cluster")
    with pytest.raises(TypeError, match="resources must be a dict of Ray task options"):
        map_shards(fail_on_three, [1], resources=4, where="local")


def test_ray_address_in_the_environment_means_ray(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert ray_available()
