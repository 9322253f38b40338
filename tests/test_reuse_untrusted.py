"""A source lab is untrusted: reuse never publishes bytes it did not verify, and never fails on what a
source holds.

Lab A runs a two-step chain; lab B runs the same two steps (reused from A) and a third step of its own.
Each test makes lab A's folder hostile or changing in one way, and checks that lab B either reuses
verified bytes, runs the step itself with the reason in its log, or (an input published by reference
that changed under the step reading it) fails that step naming the input.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorRunError, ExecutorStep, output_path_of, versioned
from marin.execution.reuse import CacheFrom, reuse_output
from marin.storage import exists, join, read_bytes, read_text, write_bytes
from tests.executor_steps import CountConfig, count_step, invocations

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class RewriteConfig:
    value: int = 0
    """A versioned payload."""
    inputs: list = field(default_factory=list)
    """Output paths of dependencies (output_path_of)."""
    how: str = "replace"
    """How the source's file changes while this step reads it: 'replace' (a new file at the path) or
    'in_place' (the same file overwritten, its mtime put back) (not versioned)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def read_while_the_source_changes(config: RewriteConfig) -> None:
    """Reads its input; meanwhile another writer of the source lab rewrites that file (same size, other
    bytes). What it writes rests on bytes that are no longer the ones reuse verified."""
    path = join(config.inputs[0], "out.json")
    data = read_bytes(path)
    other = data.replace(b"3", b"8")
    if config.how == "in_place":
        before = os.stat(path)
        with open(path, "r+b") as f:
            f.write(other)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        write_bytes(path, other)
    total = json.loads(data)["total"] + config.value
    write_bytes(join(config.output_path, "out.json"), json.dumps({"total": total}).encode())


def shared(counter: str) -> tuple[ExecutorStep, ExecutorStep]:
    a = ExecutorStep("lab/a", count_step, CountConfig(value=versioned(1), counter_path=counter))
    b = ExecutorStep(
        "lab/b", count_step, CountConfig(value=versioned(2), inputs=[output_path_of(a)], counter_path=counter)
    )
    return a, b


def lab_a(prefix: str, counter: str) -> dict[str, str]:
    """Lab A ran the shared steps; their output folders by step name."""
    steps = shared(counter)
    paths = Executor(prefix, backend="local", experiment_name="chain").run([steps[-1]])
    return {s.name: paths[s] for s in steps}


def reuse_log(out: str) -> str:
    logs = join(out, ".executor_logs")
    return "".join(read_text(join(logs, n)) or "" for n in sorted(os.listdir(logs)) if n.endswith(".reuse.log"))


# -- inputs published by reference ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("storage", "how", "earlier_run"),
    [
        ("local", "replace", False),
        ("local", "in_place", False),
        ("local", "replace", True),
        ("gcs", "replace", False),
        ("s3", "replace", False),
    ],
    ids=["replaced", "in-place-mtime-put-back", "referenced-in-an-earlier-run", "gcs", "s3"],
)
def test_a_referenced_input_that_changes_while_a_step_reads_it_fails_that_step_naming_it(
    tmp_path, request, storage, how, earlier_run
):
    source = (
        str(tmp_path / "lab-a") if storage == "local" else request.getfixturevalue("bucket_prefix_factory")(storage)
    )
    paths_a = lab_a(source, str(tmp_path / "calls-a"))
    lab_b, counter = str(tmp_path / "lab-b"), str(tmp_path / "calls-b")
    a, b = shared(counter)
    cache = CacheFrom(sources=(source,), mode="reference")
    if earlier_run:  # b was referenced by an earlier run of lab B: this run skips it and only reads it
        Executor(lab_b, backend="local", experiment_name="chain", cache_from=cache).run([b])
        cache = None
    c = ExecutorStep(
        "lab/c", read_while_the_source_changes, RewriteConfig(value=versioned(5), inputs=[output_path_of(b)], how=how)
    )
    executor = Executor(lab_b, backend="local", experiment_name="chain", cache_from=cache)
    with pytest.raises(ExecutorRunError) as caught:
        executor.run([c])
    result = caught.value.result
    outcomes = {s.name: o for s, o in result.outcomes.items()}
    assert outcomes["lab/b"].status == ("SKIPPED" if earlier_run else "REUSED")
    changed = join(paths_a["lab/b"], "out.json")
    assert outcomes["lab/c"].status == "FAILED"
    assert f"the referenced input {changed} changed while the step read it" in outcomes["lab/c"].error
    out_c = result[c]
    assert read_text(join(out_c, ".executor_status")).strip() == "FAILED"
    assert not exists(join(out_c, "out.json")), "nothing of the step was published"
    assert not exists(join(out_c, ".executor_manifest.json"))


def test_a_referenced_input_that_does_not_change_is_read_without_hashing_it_twice(tmp_path, monkeypatch):
    """An input verified by reference earlier in this run, unchanged since (same versions), is not hashed
    again before the step downstream reads it; the step runs and its output is published."""
    from marin.execution import reuse

    source = str(tmp_path / "lab-a")
    lab_a(source, str(tmp_path / "calls-a"))
    counter = str(tmp_path / "calls-b")
    a, b = shared(counter)
    c = ExecutorStep(
        "lab/c", count_step, CountConfig(value=versioned(4), inputs=[output_path_of(b)], counter_path=counter)
    )
    hashed = []
    real = reuse._verify_bytes
    monkeypatch.setattr(reuse, "_verify_bytes", lambda cand, staging: hashed.append(cand.path) or real(cand, staging))
    executor = Executor(
        str(tmp_path / "lab-b"),
        backend="local",
        experiment_name="chain",
        cache_from=CacheFrom(sources=(source,), mode="reference"),
    )
    result = executor.run([c])
    assert [o.status for o in result.outcomes.values()] == ["REUSED", "REUSED", "SUCCESS"]
    assert len(hashed) == 2, hashed
    assert json.loads(read_bytes(join(result[c], "out.json"))) == {"total": 1 + 2 + 4}


# -- hostile records ------------------------------------------------------------------------------


@pytest.mark.parametrize("run", ["x", [1], {"run_id": 7}], ids=["string", "list", "run-id-int"])
def test_a_source_record_of_the_wrong_type_is_not_reused_and_the_step_runs_itself(tmp_path, caplog, run):
    source = str(tmp_path / "lab-a")
    paths_a = lab_a(source, str(tmp_path / "calls-a"))
    info_path = join(paths_a["lab/a"], ".executor_info")
    info = json.loads(read_bytes(info_path))
    write_bytes(info_path, json.dumps({**info, "run": run}).encode())
    lab_b, counter = str(tmp_path / "lab-b"), str(tmp_path / "calls-b")
    a, b = shared(counter)
    result = Executor(lab_b, backend="local", experiment_name="chain", cache_from=CacheFrom(sources=(source,))).run([b])
    outcomes = {s.name: o.status for s, o in result.outcomes.items()}
    assert outcomes == {"lab/a": "SUCCESS", "lab/b": "REUSED"}, "a ran itself; b still verified"
    assert invocations(counter) == [result[a]]
    assert f"{paths_a['lab/a']}: .executor_info field 'run" in caplog.text, "the plan says why"
    again = Executor(lab_b, backend="local", experiment_name="chain").run([b])
    assert {o.status for o in again.outcomes.values()} == {"SKIPPED"}, "nothing was marked FAILED"


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=()), max_size=30)
    | st.sampled_from(
        ["", "\x00", "../x", "/etc/passwd", "a\x00b", ".executor_info", "a/../../b", "\ud800", "x" * 5000]
    )
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _dumps(value) -> bytes:
    return json.dumps(value).encode()  # \ud800 stays an escape: a lone surrogate on disk, as a hostile lab writes it


@st.composite
def hostile_records(draw, info: dict, manifest: dict):
    """(file name, bytes): one of the step's records with one field (or all of it) hostile."""
    target = draw(st.sampled_from([".executor_info", ".executor_manifest.json", ".executor_status"]))
    if target == ".executor_status":
        return target, draw(
            st.binary(max_size=40) | st.sampled_from([b"SUCCESS\x00", b"\xffSUCCESS", b" SUCCESS\n" * 200])
        )
    record = json.loads(json.dumps(info if target == ".executor_info" else manifest))
    how = draw(st.sampled_from(["field", "entry", "whole", "bytes"]))
    if how == "bytes":
        return target, draw(st.binary(max_size=60))
    if how == "whole":
        return target, _dumps(draw(JSON_VALUES))
    if how == "entry" and target == ".executor_manifest.json":
        entry = record["files"][0]
        entry[draw(st.sampled_from(["path", "size", "sha256"]))] = draw(JSON_VALUES)
    else:
        keys = ["name", "hash", "code_fingerprint", "run"] if target == ".executor_info" else ["files", "total_size"]
        record[draw(st.sampled_from(keys))] = draw(JSON_VALUES | st.just({"run_id": [1]}))
    return target, _dumps(record)


@pytest.fixture(scope="module")
def one_source(tmp_path_factory):
    """Lab A's folder of step `lab/a`, and the record lab B would give that step."""
    base = tmp_path_factory.mktemp("hostile")
    paths = lab_a(str(base / "lab-a"), str(base / "calls"))
    out = paths["lab/a"]
    info = json.loads(read_bytes(join(out, ".executor_info")))
    return str(base / "lab-a"), out, info


def test_every_hostile_field_of_a_source_record_means_not_reused_with_a_reason(one_source, tmp_path_factory):
    source, out, info = one_source
    originals = {n: read_bytes(join(out, n)) for n in (".executor_info", ".executor_manifest.json", ".executor_status")}
    manifest = json.loads(originals[".executor_manifest.json"])
    reasons: list[str] = []

    class Reasons(logging.Handler):
        def emit(self, record):
            reasons.append(record.getMessage())

    handler = Reasons(logging.WARNING)
    logging.getLogger("marin.execution.reuse").addHandler(handler)

    def entry(**fields) -> tuple[str, bytes]:
        return ".executor_manifest.json", _dumps({**manifest, "files": [{**manifest["files"][0], **fields}]})

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(hostile_records(info, manifest))
    @example((".executor_info", _dumps({**info, "run": "x"})))
    @example((".executor_info", _dumps({**info, "run": [1]})))
    @example((".executor_info", _dumps({**info, "run": {"run_id": {"a": 1}}})))
    @example((".executor_info", _dumps({**info, "code_fingerprint": ["x"]})))
    @example(entry(path="out\x00.json"))
    @example(entry(path="\ud800"))
    @example(entry(path="out.json\n"))
    @example(entry(size=2**63))
    @example(entry(size=True))
    @example(entry(sha256="z" * 64))
    @example((".executor_manifest.json", _dumps({**manifest, "total_size": "12"})))
    @example((".executor_status", b"\xff\xfeSUCCESS"))
    def check(record):
        name, data = record
        write_bytes(join(out, name), data)
        try:
            staging = str(tmp_path_factory.mktemp("staging"))
            reasons.clear()
            reused = reuse_output(CacheFrom(sources=(source,)), info, staging)
        finally:
            write_bytes(join(out, name), originals[name])
        if reused is None:
            assert any("not reused from" in r for r in reasons), (record, reasons)
            return
        # what was reused verified: the copied bytes are the source's, whatever the records said
        for entry in reused.manifest["files"]:
            assert read_bytes(join(staging, entry["path"])) == read_bytes(join(out, entry["path"]))

    try:
        check()
    finally:
        logging.getLogger("marin.execution.reuse").removeHandler(handler)


# -- memory and missing sources -----------------------------------------------------------------------


# code_changed: lab A ran under pytest, whose rewritten test modules give its steps another code fingerprint
PEAK_RSS = """
import json, sys
from marin.execution import Executor
from marin.execution.reuse import CacheFrom
from tests.test_reuse_untrusted import shared
a, b = shared(sys.argv[3])
result = Executor(sys.argv[1], backend="local", experiment_name="chain",
                  cache_from=CacheFrom(sources=tuple(sys.argv[2].split(",")), code_changed=True)).run([b])
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"outcomes": [o.status for o in result.outcomes.values()], "peak_rss_mb": int(hwm.split()[1]) / 1024}))
"""
"""Lab B's run in a process of its own, and its peak resident memory: VmHWM, the high-water mark of this
program's memory. Not `ru_maxrss`, which Linux carries over `exec` from the forking process (a pytest
worker that trained a model in-process passed its own 2 GB on to this figure)."""


def test_reading_a_source_with_2_gb_records_is_bounded_in_memory(tmp_path):
    """A 2 GB manifest (first source) and a 2 GB file among the experiment records (second source), both
    sparse: neither is read whole, so lab B's reuse of a few bytes stays far below their size."""
    good = str(tmp_path / "lab-a")
    paths_a = lab_a(good, str(tmp_path / "calls-a"))
    with open(join(good, "experiments", "huge-00000000.json"), "wb") as f:
        f.truncate(2 << 30)
    bad = str(tmp_path / "lab-bad")
    shutil.copytree(good, bad, ignore=shutil.ignore_patterns("experiments"))
    with open(join(bad, os.path.relpath(paths_a["lab/a"], good), ".executor_manifest.json"), "wb") as f:
        f.truncate(2 << 30)
    env = {**os.environ, "PYTHONPATH": REPO}
    run = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(tmp_path / "lab-b"), f"{bad},{good}", str(tmp_path / "calls-b")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=str(tmp_path),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    assert measured["outcomes"] == ["REUSED", "REUSED"], run.stderr[-3000:]
    # the old tree read both whole (4.1 GB); this takes ~110 MB
    assert measured["peak_rss_mb"] < 1000, measured
    out_b = join(str(tmp_path / "lab-b"), os.path.relpath(paths_a["lab/a"], good))
    assert f"{bad}/lab/a-" in reuse_log(out_b) and "the manifest is larger than" in reuse_log(out_b)
    origin = json.loads(read_bytes(join(out_b, ".executor_info")))["reused_from"]
    assert origin["path"] == paths_a["lab/a"] and origin["record"].startswith(join(good, "experiments", "chain-"))


def test_a_cache_from_path_that_does_not_exist_is_a_warning_naming_it(tmp_path, caplog):
    source = str(tmp_path / "lab-a")
    lab_a(source, str(tmp_path / "calls-a"))
    missing = str(tmp_path / "lab-typo")
    a, b = shared(str(tmp_path / "calls-b"))
    with caplog.at_level(logging.WARNING):
        result = Executor(
            str(tmp_path / "lab-b"),
            backend="local",
            experiment_name="chain",
            cache_from=CacheFrom(sources=(missing, source)),
        ).run([b])
    assert [o.status for o in result.outcomes.values()] == ["REUSED", "REUSED"]
    assert f"--cache_from {missing} does not exist" in caplog.text


@pytest.mark.parametrize("storage", ["gcs", "s3"])
def test_a_bucket_object_has_the_same_version_asked_alone_as_read_with_its_bytes(request, storage):
    """Reuse asks an object's version before and after reading a bounded part of it (a metadata request:
    asking must not download a 2 GB object); the answer is the token its bytes come with."""
    from marin.storage import current_version, delete, read_with_version

    path = join(request.getfixturevalue("bucket_prefix_factory")(storage), "x.json")
    assert current_version(path) is None
    write_bytes(path, b"one")
    first = current_version(path)
    assert first == read_with_version(path).version
    write_bytes(path, b"two")
    assert current_version(path) == read_with_version(path).version != first
    delete(path)
    assert current_version(path) is None


@pytest.mark.parametrize("storage", ["gcs", "s3"])
def test_a_bucket_source_is_read_bounded_too(request, tmp_path, caplog, monkeypatch, storage):
    """On a bucket a source's records are read with one ranged request pinned to their version: a manifest
    over the limit (lowered here, to spare uploading 64 MiB) is refused, an empty status is a reason."""
    from marin.execution import reuse

    source = request.getfixturevalue("bucket_prefix_factory")(storage)
    paths_a = lab_a(source, str(tmp_path / "calls-a"))
    write_bytes(join(paths_a["lab/a"], ".executor_status"), b"")
    manifest_b = read_bytes(join(paths_a["lab/b"], ".executor_manifest.json"))
    monkeypatch.setattr(reuse, "MANIFEST_LIMIT", len(manifest_b) - 1)
    counter = str(tmp_path / "calls-b")
    a, b = shared(counter)
    with caplog.at_level(logging.WARNING):
        result = Executor(
            str(tmp_path / "lab-b"), backend="local", experiment_name="chain", cache_from=CacheFrom(sources=(source,))
        ).run([b])
    assert [o.status for o in result.outcomes.values()] == ["SUCCESS", "SUCCESS"], "both ran themselves"
    assert f"{paths_a['lab/a']} is '', not SUCCESS" in caplog.text
    assert f"the manifest is larger than {len(manifest_b) - 1:,} bytes" in caplog.text
    monkeypatch.setattr(reuse, "MANIFEST_LIMIT", len(manifest_b))
    again = Executor(
        str(tmp_path / "lab-c"), backend="local", experiment_name="chain", cache_from=CacheFrom(sources=(source,))
    ).run([b])
    assert [o.status for o in again.outcomes.values()] == ["SUCCESS", "REUSED"], "at the limit it is read"
