"""run_shards without Ray: shard order kept, failures named, ledgers make a rerun skip finished shards."""

from __future__ import annotations

import json
import time

import pytest

from marin.stepkit.sharding import ShardResources, ray_available, run_shards


def square_after(scale: int, shard: tuple[int, float]) -> int:
    value, delay = shard
    time.sleep(delay)
    return scale * value * value


def fail_on_three(config: None, value: int) -> int:
    if value == 3:
        raise ValueError(f"bad value {value}")
    return value


def count_and_write(folder: str, value: int) -> dict:
    """Writes `out-<value>` and appends one line per call to `calls.txt` (what a rerun redoes)."""
    with open(f"{folder}/calls.txt", "a") as f:
        f.write(f"{value}\n")
    with open(f"{folder}/out-{value}", "w") as f:
        f.write(str(value * 10))
    return {"value": value, "tens": value * 10}


@pytest.mark.parametrize(("workers", "local"), [(1, "process"), (2, "process"), (2, "thread")])
def test_results_come_back_in_shard_order_not_completion_order(workers, local):
    shards = [(i, 0.05 * (4 - i)) for i in range(5)]
    results = run_shards(square_after, 2, shards, desc="t", workers=workers, where="local", local=local)
    assert results == [0, 2, 8, 18, 32]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_shard_fails_the_run_with_its_own_exception_noting_the_shard(workers):
    with pytest.raises(ValueError, match="bad value 3") as info:
        run_shards(fail_on_three, None, range(6), desc="stage", workers=workers, where="local")
    assert info.value.__notes__ == ["stage: raised by shard 3 (3)"]


def test_ledgers_record_stats_and_where_and_a_rerun_redoes_only_unfinished_shards(tmp_path):
    ledgers = str(tmp_path / ".shards" / "stage")
    stats = run_shards(count_and_write, str(tmp_path), range(4), desc="t", ledger_dir=ledgers)
    assert stats == [{"value": v, "tens": 10 * v} for v in range(4)]
    ledger = json.loads((tmp_path / ".shards" / "stage" / "part-00002.json").read_text())
    assert ledger["shard"] == 2 and ledger["stats"] == {"value": 2, "tens": 20}
    assert ledger["ran"]["attempt"] == 1 and ledger["ran"]["node"] is None and ledger["ran"]["pid"] > 0
    (tmp_path / ".shards" / "stage" / "part-00002.json").unlink()  # as if the run died inside shard 2
    again = run_shards(count_and_write, str(tmp_path), range(4), desc="t", ledger_dir=ledgers, workers=2)
    assert again == stats
    assert (tmp_path / "calls.txt").read_text().split() == ["0", "1", "2", "3", "2"]
    assert json.loads((tmp_path / ".shards" / "stage" / "part-00002.json").read_text())["ran"]["attempt"] == 2


def test_empty_input_and_bad_arguments_are_named():
    assert run_shards(fail_on_three, None, [], desc="t") == []
    with pytest.raises(ValueError, match="where must be 'auto', 'ray' or 'local'"):
        run_shards(fail_on_three, None, [1], desc="t", where="cluster")
    with pytest.raises(ValueError, match="local must be 'process' or 'thread'"):
        run_shards(fail_on_three, None, [1], desc="t", local="fork")
    with pytest.raises(TypeError, match="resources must be a ShardResources"):
        run_shards(fail_on_three, None, [1], desc="t", resources={"num_cpus": 1})
    with pytest.raises(ValueError, match="workers must be >= 1"):
        run_shards(fail_on_three, None, [1], desc="t", workers=0)
    with pytest.raises(ValueError, match=r"ShardResources.memory_gb must be > 0"):
        ShardResources(memory_gb=0)
    assert ShardResources(cpu=2, memory_gb=1, custom={"x": 1}).ray_options() == {
        "num_cpus": 2,
        "memory": 1024**3,
        "resources": {"x": 1},
    }


def test_ray_address_in_the_environment_means_ray(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert ray_available()


def shards_from_a_task(folder: str) -> tuple[bool, list]:
    """What a step running as a Ray task sees: Ray is there, so its shards are Ray tasks too."""
    ledgers = f"{folder}/.shards/stage"
    return ray_available(), run_shards(count_and_write, folder, range(3), desc="t", ledger_dir=ledgers)


def test_shards_are_ray_tasks_inside_a_ray_task_and_local_in_a_driver_that_called_ray_init(
    ray_cluster, tmp_path, monkeypatch
):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert not ray_available()
    available, stats = ray_cluster.get(ray_cluster.remote(shards_from_a_task).remote(str(tmp_path)))
    assert available and stats == [{"value": v, "tens": 10 * v} for v in range(3)]
    for i in range(3):
        ran = json.loads((tmp_path / ".shards" / "stage" / f"part-{i:05d}.json").read_text())["ran"]
        assert ran["node"] == ray_cluster.get_runtime_context().get_node_id() and ran["attempt"] == 1
