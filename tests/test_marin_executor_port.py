"""Marin's executor tests (marin-community/marin, tests/test_executor.py), ported to marin's public API.

Each test keeps Marin's steps, configs and assertions; only API names are adapted:

- `Executor(prefix=..., executor_info_base_path=...)` -> `Executor(prefix, backend="local")` (steps run in
  threads of this process; `test_executor` runs on Ray too, as all of Marin's did).
- `executor.steps / output_paths / configs / versions / version_strs` (state Marin's Executor keeps after
  `run`) -> `Executor.plan_dag(steps)` (a `Plan`: `.steps`, `plan[step].version`, `.output_path`),
  `instantiate_config(planned, plan)` and the dict `run` returns; `executor.executor_info_path` ->
  `executor.run(...).record_path` (the experiment record).
- `_get_info_path` -> `marin.storage.layout.info_path`; `StatusFile(path).status` -> `read_status(path)`.
- `collect_dependencies_and_version(input_name)` (Marin's internal walk over one value) -> the version
  of a step whose config holds that input (`{"input_path": "DEP[0]/ckpt.pt"}` instead of `{"": ...}`).
- Marin's failure messages: `"1 step(s) failed"` -> `"2 step(s) did not succeed: b, a"` (marin counts the
  step marked DEP_FAILED below the failure too), and a step that failed before is refused with the same
  `ExecutorRunError` (Marin: "failed previously").
- The stale-lock test uses marin's lease API (`try_acquire`, `Lease.refresh`) for Marin's `StatusFile`
  lock methods, and backdates the lease the way Marin does: a conditional write of an old heartbeat.

Not ported: `test_status_file_reads_legacy_format`, which reads Marin's older JSON-lines
`.executor_status` (one event per line). marin's status file is one token (DESIGN.md §5) and marin
never wrote that older format, so there is no legacy file for it to read.
`test_parallelism` is not skipped here (Marin's `skipif(lambda: ...)` is always true, so it never ran there).
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from threading import Thread

import pytest

from marin.execution import (
    THIS_OUTPUT_PATH,
    Executor,
    ExecutorRunError,
    ExecutorStep,
    InputName,
    output_path_of,
    this_output_path,
    versioned,
)
from marin.execution.planning import instantiate_config
from marin.execution.status import read_status
from marin.storage.layout import State, info_path


@dataclass(frozen=True)
class MyConfig:
    input_path: str
    output_path: str
    n: int
    m: int


def create_log():
    with tempfile.NamedTemporaryFile(prefix="executor-log-") as f:
        return f.name


def append_log(path: str, obj):
    with open(path, "a") as f:
        print(json.dumps(asdict(obj) if obj else None), file=f)


def read_log(path: str):
    with open(path) as f:
        return list(map(json.loads, f.readlines()))


def cleanup_log(path: str):
    os.unlink(path)


def create_executor(temp_dir: str, backend: str = "local") -> Executor:
    return Executor(temp_dir, backend=backend)


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_executor(backend, request):
    if backend == "ray":
        request.getfixturevalue("ray_cluster")
    log = create_log()

    def fn(config: MyConfig | None):
        append_log(log, config)

    a = ExecutorStep(name="a", fn=fn, config=None)
    b = ExecutorStep(
        name="b",
        fn=fn,
        config=MyConfig(input_path=output_path_of(a, "sub"), output_path=this_output_path(), n=versioned(3), m=4),
    )

    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        executor = create_executor(temp_dir, backend)
        output_paths = executor.run(steps=[b])
        plan = executor.plan_dag([b])

        assert len(plan.steps) == 2
        assert output_paths[a].startswith(executor.prefix + "/a-")
        assert output_paths[b].startswith(executor.prefix + "/b-")

        results = read_log(log)
        assert len(results) == 2
        assert results[0] is None
        assert re.match(executor.prefix + r"/a-(\w+)/sub", results[1]["input_path"])
        assert re.match(executor.prefix + r"/b-(\w+)", results[1]["output_path"])
        assert results[1]["n"] == 3
        assert results[1]["m"] == 4

        def asdict_optional(obj):
            return asdict(obj) if obj else None

        def check_info(step_info: dict, planned):
            assert step_info["name"] == planned.name
            assert step_info["output_path"] == output_paths[planned.step]
            assert step_info["config"] == asdict_optional(instantiate_config(planned, plan))
            assert step_info["version"] == planned.version

        with open(output_paths.record_path) as f:
            info = json.load(f)
            assert info["prefix"] == executor.prefix
            for step_info, planned in zip(info["steps"], plan.steps, strict=True):
                check_info(step_info, planned)

        for planned in plan.steps:
            assert read_status(planned.output_path) == State.SUCCESS
            with open(info_path(planned.output_path)) as f:
                check_info(json.load(f), planned)

    cleanup_log(log)


def test_force_run_failed():
    log = create_log()

    temp_file_to_mark_failure = tempfile.NamedTemporaryFile(prefix="executor-fail-", delete=False)
    temp_file_to_mark_failure.write(b"hello")
    temp_file_to_mark_failure.close()

    path = temp_file_to_mark_failure.name
    assert os.path.exists(path)

    def fn(config: MyConfig | None):
        print(config.input_path, os.path.exists(config.input_path), flush=True)
        if os.path.exists(config.input_path):
            raise Exception("Failed")
        else:
            append_log(log, config)

    def fn_pass(config: MyConfig | None):
        append_log(log, config)

    b = ExecutorStep(name="b", fn=fn, config=MyConfig(input_path=path, output_path=this_output_path(), n=1, m=1))
    a = ExecutorStep(
        name="a",
        fn=fn_pass,
        config=MyConfig(input_path=output_path_of(b, "sub"), output_path=this_output_path(), n=2, m=2),
    )

    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        executor_initial = create_executor(temp_dir)
        with pytest.raises(RuntimeError, match=r"2 step\(s\) did not succeed: b, a"):
            executor_initial.run(steps=[a])

        with pytest.raises(FileNotFoundError):
            read_log(log)

        os.unlink(temp_file_to_mark_failure.name)

        executor_non_force = create_executor(temp_dir)
        with pytest.raises(ExecutorRunError, match=r"did not succeed: b"):
            executor_non_force.run(steps=[a], force_run_failed=False)

        with pytest.raises(FileNotFoundError):
            read_log(log)

        executor_force = create_executor(temp_dir)
        executor_force.run(steps=[a], force_run_failed=True)
        results = read_log(log)
        assert len(results) == 2

    cleanup_log(log)


def test_status_actor_one_executor_waiting_for_another():
    with tempfile.NamedTemporaryFile() as file:
        with open(file.name, "w") as f:
            f.write("0")

        @dataclass
        class Config:
            number: int
            path: str
            wait: int
            input_path: str

        def fn(config: Config):
            time.sleep(config.wait)
            with open(config.path) as f:
                number = int(f.read())
            with open(config.path, "w") as f:
                f.write(str(number + config.number))

        a = ExecutorStep(name="a", fn=fn, config=Config(versioned(1), file.name, 2, ""))
        b = ExecutorStep(name="b", fn=fn, config=Config(versioned(2), file.name, 0, output_path_of(a)))

        with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
            executor1 = create_executor(temp_dir)
            executor2 = create_executor(temp_dir)

            run1 = Thread(target=executor1.run, args=([a],))
            run2 = Thread(target=executor2.run, args=([a, b],))

            run1.start()
            run2.start()

            run1.join()
            run2.join()

            with open(file.name) as f:
                assert int(f.read()) == 3


def test_status_actor_multiple_steps_race_condition():
    with tempfile.TemporaryDirectory(prefix="output_path") as output_path:

        @dataclass
        class Config:
            path: str

        def fn(config: Config):
            random_str = str(random.randint(0, 1000))
            time.sleep(2)
            with open(os.path.join(config.path, random_str), "w") as f:
                f.write("1")

        with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
            executor_refs = []
            for _ in range(10):
                executor = create_executor(temp_dir)
                thread = Thread(
                    target=executor.run, args=([ExecutorStep(name="step", fn=fn, config=Config(output_path))],)
                )
                thread.start()
                executor_refs.append(thread)

            for executor_ref in executor_refs:
                executor_ref.join()

            files = os.listdir(output_path)
            print(files)
            assert len(files) == 1
            os.unlink(os.path.join(output_path, files[0]))


def test_parallelism():
    """Make sure that parallel execution is possible."""
    log = create_log()
    run_time = 5
    parallelism = 6

    def fn(config: MyConfig):
        append_log(log, config)
        time.sleep(run_time)

    bs = [
        ExecutorStep(name=f"b{i}", fn=fn, config=MyConfig(input_path="/", output_path=this_output_path(), n=1, m=1))
        for i in range(parallelism)
    ]
    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        executor = create_executor(temp_dir)
        start_time = time.time()
        executor.run(steps=bs)
        end_time = time.time()

        results = read_log(log)
        assert len(results) == parallelism
        for i in range(parallelism):
            assert results[i]["output_path"].startswith(executor.prefix + "/b")

        serial_duration = run_time * parallelism
        actual_duration = end_time - start_time
        print(f"Duration: {actual_duration:.2f}s")
        assert actual_duration < serial_duration * 0.75, (
            f"Expected parallel execution to be at least 25% faster than serial. "
            f"Actual: {actual_duration:.2f}s, Serial: {serial_duration:.2f}s"
        )

    cleanup_log(log)


def test_versioning():
    """Versions (output paths) depend on upstream dependencies and only the versioned fields."""
    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:

        def fn(config: MyConfig):
            pass

        def get_output_path(a_input_path: str, a_n: int, a_m: int, name: str, b_n: int, b_m: int):
            a = ExecutorStep(
                name="a",
                fn=fn,
                config=MyConfig(
                    input_path=versioned(a_input_path), output_path=this_output_path(), n=versioned(a_n), m=a_m
                ),
            )
            b = ExecutorStep(
                name="b",
                fn=fn,
                config=MyConfig(
                    input_path=output_path_of(a, name), output_path=this_output_path(), n=versioned(b_n), m=b_m
                ),
            )
            executor = create_executor(temp_dir)
            return executor.run(steps=[b])[b]

        defaults = dict(a_input_path="a", a_n=1, a_m=1, name="foo", b_n=1, b_m=1)
        default_output_path = get_output_path(**defaults)

        def assert_same_version(**kwargs):
            assert get_output_path(**(defaults | kwargs)) == default_output_path

        def assert_diff_version(**kwargs):
            assert get_output_path(**(defaults | kwargs)) != default_output_path

        assert_same_version()
        assert_diff_version(a_input_path="aa")
        assert_diff_version(a_n=2)
        assert_same_version(a_m=2)
        assert_diff_version(name="bar")
        assert_diff_version(b_n=2)
        assert_same_version(b_m=2)


def test_dedup_version():
    """Two `ExecutorStep`s with equal versions resolve to one."""

    def fn(config: MyConfig | None):
        pass

    def create_step():
        a = ExecutorStep(name="a", fn=fn, config=None)
        return ExecutorStep(
            name="b",
            fn=fn,
            config=MyConfig(input_path=output_path_of(a, "sub"), output_path=this_output_path(), n=versioned(3), m=4),
        )

    b1 = create_step()
    b2 = create_step()

    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        executor = create_executor(temp_dir)
        executor.run(steps=[b1, b2])
        assert len(executor.plan_dag([b1, b2]).steps) == 2


def test_run_only_some_steps():
    log = create_log()

    def fn(config):
        append_log(log, config)

    @dataclass(frozen=True)
    class CConfig:
        m: 10

    a = ExecutorStep(name="a", fn=fn, config=None)
    c = ExecutorStep(name="c", fn=fn, config=CConfig(m=10))
    b = ExecutorStep(
        name="b",
        fn=fn,
        config=MyConfig(input_path=output_path_of(a, "sub"), output_path=this_output_path(), n=versioned(3), m=4),
    )

    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        executor = create_executor(temp_dir)
        executor.run(steps=[b, c], run_only=["^b$"])

        results = read_log(log)
        assert len(results) == 2
        assert results[0] is None
        assert results[1]["m"] == 4

    cleanup_log(log)

    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        executor = create_executor(temp_dir)
        executor.run(steps=[a, b, c], run_only=["a", "c"])

        results = read_log(log)
        assert len(results) == 2
        assert (results[0] is None and results[1]["m"] == 10) or (results[1] is None and results[0]["m"] == 10)


@dataclass(frozen=True)
class DummyCfg:
    x: int = 0
    input_path: str | None = None
    output_path: str = THIS_OUTPUT_PATH


def dummy_fn(cfg: DummyCfg):
    out_path = os.path.join(cfg.output_path, "dummy")
    os.makedirs(out_path, exist_ok=True)
    with open(os.path.join(out_path, "done.txt"), "w") as f:
        f.write(str(cfg.x))
    return cfg.x


def shouldnt_run_fn(cfg: DummyCfg):
    raise RuntimeError("This function should not run.")


def _version_of(inp: InputName) -> tuple[dict, list, list]:
    """Marin's collect_dependencies_and_version(inp): the input's version, dependencies and pseudo-dependencies."""
    child = ExecutorStep(name="child", fn=dummy_fn, config=DummyCfg(input_path=inp))
    plan = Executor("/unused", backend="local").plan_dag([child])
    planned = plan[child]
    return (
        {k: v for k, v in planned.version["config"].items()},
        [d.step for d in planned.dependencies],
        [d.step for d in planned.pseudo_dependencies],
    )


def test_collect_deps_skip_vs_block():
    parent = ExecutorStep(name="parent", fn=dummy_fn, config=DummyCfg(x=1))

    inp_skip = InputName(step=parent, name="ckpt.pt").nonblocking()
    ver, deps, pseudo = _version_of(inp_skip)
    assert parent in pseudo and parent not in deps
    assert ver == {"input_path": "PSEUDO_DEP[0]/ckpt.pt"}

    inp_block = InputName(step=parent, name="ckpt.pt")
    ver, deps, pseudo = _version_of(inp_block)
    assert parent in deps and parent not in pseudo
    assert ver == {"input_path": "DEP[0]/ckpt.pt"}


def test_parent_version_bubbles_into_skip_child():
    """Change the parent's config: the child's version changes even if the parent is only a pseudo-dependency."""
    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        parent1 = ExecutorStep(name="parent", fn=dummy_fn, config=DummyCfg(x=versioned(1)))
        child1 = ExecutorStep(
            name="child", fn=dummy_fn, config=DummyCfg(0, input_path=parent1.cd("dummy").nonblocking())
        )

        executor = create_executor(temp_dir)
        executor.run(steps=[child1])
        version1 = executor.plan_dag([child1])[child1].version
        executor = create_executor(temp_dir)

        parent2 = ExecutorStep(name="parent2", fn=dummy_fn, config=DummyCfg(x=versioned(2)))
        child2 = ExecutorStep(
            name="child", fn=dummy_fn, config=DummyCfg(x=0, input_path=parent2.cd("dummy").nonblocking())
        )
        executor.run(steps=[child2])
        version2 = executor.plan_dag([child2])[child2].version

        assert version1 != version2


def test_parent_doesnt_run_on_skip_parent():
    """The parent does not run if the child only reads it nonblocking."""
    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        parent = ExecutorStep(name="parent", fn=shouldnt_run_fn, config=DummyCfg(x=1))
        child = ExecutorStep(name="child", fn=dummy_fn, config=DummyCfg(input_path=parent.cd("dummy").nonblocking()))

        executor = create_executor(temp_dir)
        executor.run(steps=[child])


def test_skippable_parent_will_run_if_asked():
    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        parent = ExecutorStep(name="parent", fn=dummy_fn, config=DummyCfg(x=1))
        child = ExecutorStep(name="child", fn=dummy_fn, config=DummyCfg(input_path=parent.cd("dummy").nonblocking()))

        executor = create_executor(temp_dir)
        output_paths = executor.run(steps=[child], run_only=["parent"])

        assert os.path.exists(os.path.join(output_paths[parent], "dummy", "done.txt"))


def test_parent_will_run_if_some_child_is_not_skippable():
    with tempfile.TemporaryDirectory(prefix="executor-") as temp_dir:
        parent = ExecutorStep(name="parent", fn=dummy_fn, config=DummyCfg(x=1))
        child = ExecutorStep(name="child", fn=dummy_fn, config=DummyCfg(input_path=parent.cd("dummy").nonblocking()))
        child2 = ExecutorStep(name="child2", fn=dummy_fn, config=DummyCfg(input_path=parent.cd("dummy")))

        executor = create_executor(temp_dir)
        output_paths = executor.run(steps=[child, child2])

        assert os.path.exists(os.path.join(output_paths[parent], "dummy", "done.txt"))


def test_status_file_takeover_stale_lock_then_refresh(tmp_path):
    """Taking over a stale lock from a dead worker, then refreshing it.

    Adapted: Marin calls a lock stale when its heartbeat *time* is old, which trusts the holder's clock;
    marin calls it stale once the taker has seen the same version unchanged for the timeout on its own
    monotonic clock (docs/executor.md), so the taker looks twice, the injected clock moving past the timeout.
    """
    from marin.execution.lease import Clock, Lease, LeaseHeld, lease_timeout_s, try_acquire
    from marin.storage import read_with_version, replace_if_unchanged

    class SteppedClock(Clock):
        now = 1000.0

        def monotonic(self) -> float:
            return self.now

    lock = str(tmp_path / ".executor_lease")

    dead_worker = try_acquire(lock, "dead-worker")
    assert isinstance(dead_worker, Lease)

    stale = {"owner": "dead-worker", "heartbeat": time.time() - lease_timeout_s() - 10, "acquired": 0.0}
    assert replace_if_unchanged(lock, json.dumps(stale).encode(), dead_worker.version) is not None

    clock, seen = SteppedClock(), {}
    assert isinstance(try_acquire(lock, "live-worker", seen, clock), LeaseHeld)
    clock.now += lease_timeout_s() + 1
    live_worker = try_acquire(lock, "live-worker", seen, clock)
    assert isinstance(live_worker, Lease) and live_worker.took_over

    after_takeover = json.loads(read_with_version(lock).data)
    assert after_takeover["owner"] == "live-worker"

    time.sleep(0.1)
    assert live_worker.refresh()

    after_refresh = json.loads(read_with_version(lock).data)
    assert after_refresh["owner"] == "live-worker"
    assert after_refresh["heartbeat"] > after_takeover["heartbeat"]
