"""Reuse across labs (`--cache_from`): what verifies is published here as REUSED, what does not runs instead.

Two labs are two prefixes; lab B runs the same chain with its last step changed, so the first two steps
have the same identities in both and only the last must run. Every rejection case tampers with lab A's
folder in one way and checks that lab B runs the step, that the log names the reason, and that lab A
was not written.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from marin.execution import Executor, ExecutorStep, output_path_of, versioned
from marin.execution.reuse import CacheFrom
from marin.storage import backend_for, exists, join, read_bytes, read_text, write_bytes
from tests.executor_steps import CountConfig, count_step, invocations

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chain(counter: str, last: int = 3):
    a = ExecutorStep("lab/a", count_step, CountConfig(value=versioned(1), counter_path=counter))
    b = ExecutorStep(
        "lab/b", count_step, CountConfig(value=versioned(2), inputs=[output_path_of(a)], counter_path=counter)
    )
    c = ExecutorStep(
        "lab/c", count_step, CountConfig(value=versioned(last), inputs=[output_path_of(b)], counter_path=counter)
    )
    return a, b, c


def snapshot(prefix: str) -> dict[str, str]:
    """Every object under a prefix with its version token (inode+mtime locally, generation, ETag)."""
    return dict(backend_for(prefix).list_versions(prefix))


def reuse_log(out: str) -> str:
    names = [n for n in backend_for(out).list_names(join(out, ".executor_logs")) if n.endswith(".reuse.log")]
    return "".join(read_text(join(out, ".executor_logs", n)) or "" for n in names)


@pytest.fixture
def lab_a(tmp_path, prefix):
    """Lab A ran the chain; returns (prefix, its record, output paths by step name)."""
    counter = str(tmp_path / "calls-a")
    steps = chain(counter)
    paths = Executor(prefix, backend="local", experiment_name="chain").run([steps[-1]])
    return prefix, paths.record_path, {s.name: paths[s] for s in steps}


def run_b(prefix_b: str, source: str, counter: str, last: int = 4, **cache):
    steps = chain(counter, last)
    sources = cache.pop("sources", (source,))
    executor = Executor(
        prefix_b, backend="local", experiment_name="chain", cache_from=CacheFrom(sources=sources, **cache)
    )
    result = executor.run([steps[-1]])
    return result, {s.name: result[s] for s in steps}


def test_second_lab_reuses_the_shared_steps_byte_identical_and_runs_only_the_changed_one(
    tmp_path, lab_a, bucket_prefix_factory, request
):
    source, record_a, paths_a = lab_a
    kind = request.node.callspec.params["prefix"]
    before = snapshot(source)
    counter_b = str(tmp_path / "calls-b")
    result, paths_b = run_b(bucket_prefix_factory(kind), source, counter_b)
    assert invocations(counter_b) == [paths_b["lab/c"]], "only the changed step ran"
    outcomes = {s.name: o.status for s, o in result.outcomes.items()}
    assert outcomes == {"lab/a": "REUSED", "lab/b": "REUSED", "lab/c": "SUCCESS"}
    for name in ("lab/a", "lab/b"):
        assert read_bytes(join(paths_b[name], "out.json")) == read_bytes(join(paths_a[name], "out.json"))
        ours = json.loads(read_bytes(join(paths_b[name], ".executor_manifest.json")))
        theirs = json.loads(read_bytes(join(paths_a[name], ".executor_manifest.json")))
        assert ours["files"] == theirs["files"]
        info = json.loads(read_bytes(join(paths_b[name], ".executor_info")))
        origin = info["reused_from"]
        assert origin["path"] == paths_a[name] and origin["source"] == source and origin["mode"] == "copy"
        assert origin["record"] == record_a
        manifest_bytes = read_bytes(join(paths_a[name], ".executor_manifest.json"))
        assert origin["manifest_sha256"] == hashlib.sha256(manifest_bytes).hexdigest()
        assert info["output_path"] == paths_b[name], "the record describes this prefix's step"
        assert read_text(join(paths_b[name], ".executor_status")) == "SUCCESS"
    assert json.loads(read_bytes(join(paths_b["lab/c"], "out.json"))) == {"total": 1 + 2 + 4}
    runs = read_text(result.record_path.removesuffix(".json") + ".runs.jsonl").splitlines()
    steps = json.loads(runs[-1])["steps"]
    assert {k.split("-")[0]: v["outcome"] for k, v in steps.items()} == {
        "lab/a": "REUSED",
        "lab/b": "REUSED",
        "lab/c": "SUCCESS",
    }
    assert all(v["reused_from"]["path"].startswith(source) for v in steps.values() if v["outcome"] == "REUSED")
    assert snapshot(source) == before, "the source was written"


def test_reuse_streams_across_backends_from_a_local_lab_into_a_bucket(tmp_path, bucket_prefix_factory):
    source = bucket_prefix_factory("local")
    chain_a = chain(str(tmp_path / "calls-a"))
    paths_a = Executor(source, backend="local", experiment_name="chain").run([chain_a[-1]])
    counter = str(tmp_path / "calls-b")
    target = bucket_prefix_factory("gcs")
    result, paths_b = run_b(target, source, counter)
    assert [o.status for o in result.outcomes.values()].count("REUSED") == 2
    assert read_bytes(join(paths_b["lab/b"], "out.json")) == read_bytes(join(paths_a[chain_a[1]], "out.json"))


def _tamper_bytes(out):
    write_bytes(join(out, "out.json"), b'{"total": 9}')  # same size, other bytes


def _tamper_missing(out):
    os.unlink(join(out, "out.json"))


def _tamper_sizes(out):
    manifest = json.loads(read_bytes(join(out, ".executor_manifest.json")))
    manifest["files"][0]["size"] += 5
    manifest["total_size"] += 5
    write_bytes(join(out, ".executor_manifest.json"), json.dumps(manifest).encode())


def _tamper_escape(out):
    outside = os.path.join(os.path.dirname(out), "secret.txt")
    with open(outside, "w") as f:
        f.write("not part of the step")
    manifest = json.loads(read_bytes(join(out, ".executor_manifest.json")))
    manifest["files"].append(
        {"path": "../secret.txt", "size": 20, "sha256": hashlib.sha256(b"not part of the step").hexdigest()}
    )
    manifest["total_size"] += 20
    write_bytes(join(out, ".executor_manifest.json"), json.dumps(manifest).encode())


def _tamper_symlink(out):
    outside = os.path.join(os.path.dirname(os.path.dirname(out)), "elsewhere.json")
    os.replace(join(out, "out.json"), outside)
    os.symlink(outside, join(out, "out.json"))


def _tamper_code(out):
    info = json.loads(read_bytes(join(out, ".executor_info")))
    info["code_fingerprint"] = "0" * 64
    write_bytes(join(out, ".executor_info"), json.dumps(info).encode())


def _tamper_identity(out):
    info = json.loads(read_bytes(join(out, ".executor_info")))
    info["hash"] = "deadbeef"
    write_bytes(join(out, ".executor_info"), json.dumps(info).encode())


@pytest.mark.parametrize(
    "tamper, reason",
    [
        (_tamper_bytes, "its bytes do not match the manifest"),
        (_tamper_missing, "listed in the manifest of"),
        (_tamper_sizes, "the manifest says"),
        (_tamper_escape, "escapes the step's folder"),
        (_tamper_symlink, "leads outside the step's folder"),
        (_tamper_code, "made by other code"),
        (_tamper_identity, "not lab/a-"),
    ],
    ids=["bytes", "missing", "sizes", "escape", "symlink", "code", "identity"],
)
def test_a_source_that_does_not_verify_is_not_reused_and_the_step_runs(tmp_path, caplog, tamper, reason):
    """Checks that need no file's bytes reject at plan time (the run's log); the others in the step's log."""
    source = str(tmp_path / "lab-a")
    steps = chain(str(tmp_path / "calls-a"))
    paths_a = Executor(source, backend="local", experiment_name="chain").run([steps[-1]])
    tamper(paths_a[steps[0]])
    before = snapshot(source)
    counter = str(tmp_path / "calls-b")
    result, paths_b = run_b(str(tmp_path / "lab-b"), source, counter)
    outcomes = {s.name: o.status for s, o in result.outcomes.items()}
    assert outcomes["lab/a"] == "SUCCESS", "the step ran instead"
    assert outcomes["lab/b"] == "REUSED", "its sibling still verified"
    assert paths_b["lab/a"] in invocations(counter)
    assert reason in reuse_log(paths_b["lab/a"]) + caplog.text
    assert json.loads(read_bytes(join(paths_b["lab/a"], "out.json"))) == {"total": 1}
    assert "reused_from" not in json.loads(read_bytes(join(paths_b["lab/a"], ".executor_info")))
    assert snapshot(source) == before


def test_code_changed_reuse_only_when_asked(tmp_path):
    source = str(tmp_path / "lab-a")
    steps = chain(str(tmp_path / "calls-a"))
    paths_a = Executor(source, backend="local", experiment_name="chain").run([steps[-1]])
    _tamper_code(paths_a[steps[0]])
    result, paths_b = run_b(str(tmp_path / "lab-b"), source, str(tmp_path / "calls-b"), code_changed=True)
    assert {s.name: o.status for s, o in result.outcomes.items()}["lab/a"] == "REUSED"
    assert (
        json.loads(read_bytes(join(paths_b["lab/a"], ".executor_info")))["reused_from"]["code_fingerprint"] == "0" * 64
    )


def test_a_source_rewritten_while_it_is_copied_is_not_reused(tmp_path, monkeypatch):
    from marin.execution import reuse

    source = str(tmp_path / "lab-a")
    steps = chain(str(tmp_path / "calls-a"))
    Executor(source, backend="local", experiment_name="chain").run([steps[-1]])
    real_copy = reuse._copy_one

    def copy_then_rewrite(src, dst):
        got = real_copy(src, dst)
        out = os.path.dirname(src)
        # another runner republishes the folder (same bytes, new manifest and status objects) meanwhile
        for name in (".executor_manifest.json", ".executor_status"):
            data = read_bytes(join(out, name))
            os.unlink(join(out, name))
            write_bytes(join(out, name), data)
        return got

    monkeypatch.setattr(reuse, "_copy_one", copy_then_rewrite)
    result, paths_b = run_b(str(tmp_path / "lab-b"), source, str(tmp_path / "calls-b"))
    assert {s.name: o.status for s, o in result.outcomes.items()}["lab/a"] == "SUCCESS"
    assert "changed while it was read" in reuse_log(paths_b["lab/a"])


def test_an_unreachable_source_is_a_warning_and_the_next_source_is_tried(tmp_path):
    source = str(tmp_path / "lab-a")
    steps = chain(str(tmp_path / "calls-a"))
    Executor(source, backend="local", experiment_name="chain").run([steps[-1]])
    result, paths_b = run_b(
        str(tmp_path / "lab-b"), "unused", str(tmp_path / "calls-b"), sources=("http://127.0.0.1:9/lab", source)
    )
    assert {s.name: o.status for s, o in result.outcomes.items()}["lab/a"] == "REUSED"
    assert "http://127.0.0.1:9/lab cannot be read" in reuse_log(paths_b["lab/a"])


def test_plan_shows_what_would_be_reused_from_where_and_the_bytes(tmp_path):
    source = str(tmp_path / "lab-a")
    subprocess.run(
        [sys.executable, "experiments/tutorial/hello_world.py", "--prefix", source, "--backend", "local"],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "marin.cli",
            "plan",
            "experiments/tutorial/hello_world.py",
            "--prefix",
            str(tmp_path / "lab-b"),
            "--cache_from",
            source,
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    data = [line for line in out.splitlines() if "hello/data-" in line][0]
    assert data.split()[0] == "reuse" and f"from {source}/hello/data-" in data and "bytes to copy" in data
    assert "2 steps (2 reuse)" in out
    assert out.splitlines()[-2].endswith(f"bytes to verify and copy, from {source}")
    assert not exists(str(tmp_path / "lab-b")), "plan wrote nothing"


def test_marin_cache_from_environment_and_repeated_flags(monkeypatch, tmp_path):
    from marin.execution.main import cache_from_of, parse_main_args

    cfg = parse_main_args(["--cache_from", "gs://a/lab", "--cache_from", "s3://b/lab", "--cache_mode", "reference"])
    cache = cache_from_of(cfg)
    assert cache.sources == ("gs://a/lab", "s3://b/lab") and cache.mode == "reference"
    monkeypatch.setenv("MARIN_CACHE_FROM", f"gs://a/lab,{tmp_path}")
    assert cache_from_of(parse_main_args([])).sources == ("gs://a/lab", str(tmp_path))
    monkeypatch.delenv("MARIN_CACHE_FROM")
    assert cache_from_of(parse_main_args([])) is None
    with pytest.raises(ValueError, match="cache_mode"):
        CacheFrom(sources=("x",), mode="link")  # type: ignore[arg-type]


def test_reference_mode_reads_the_source_and_refuses_once_its_bytes_changed(tmp_path):
    from marin.tools.verify import rehash_mismatches

    source = str(tmp_path / "lab-a")
    steps = chain(str(tmp_path / "calls-a"))
    paths_a = Executor(source, backend="local", experiment_name="chain").run([steps[-1]])
    lab_b, counter = str(tmp_path / "lab-b"), str(tmp_path / "calls-b")
    result, paths_b = run_b(lab_b, source, counter, mode="reference")
    assert [o.status for o in result.outcomes.values()].count("REUSED") == 2
    assert invocations(counter) == [paths_b["lab/c"]]
    assert not exists(join(paths_b["lab/b"], "out.json")), "nothing was copied"
    info_c = json.loads(read_bytes(join(paths_b["lab/c"], ".executor_info")))
    assert info_c["config"]["inputs"] == [paths_b["lab/b"]], "the record names this prefix's step"
    assert json.loads(read_bytes(join(paths_b["lab/c"], "out.json"))) == {"total": 1 + 2 + 4}
    manifest_b = json.loads(read_bytes(join(paths_b["lab/b"], ".executor_manifest.json")))
    assert manifest_b["reference"] == paths_a[steps[1]]
    assert rehash_mismatches(paths_b["lab/b"], manifest_b) == [], "verify hashes the referenced bytes"
    origin = json.loads(read_bytes(join(paths_b["lab/b"], ".executor_info")))["reused_from"]
    assert origin["mode"] == "reference" and origin["bytes_copied"] == 0
    line = json.loads(read_text(result.record_path.removesuffix(".json") + ".runs.jsonl").splitlines()[-1])
    assert line["external_inputs"][steps[1].name + "-" + paths_b["lab/b"].rsplit("-", 1)[1]] == {
        "path": paths_a[steps[1]],
        "manifest_sha256": origin["manifest_sha256"],
    }

    write_bytes(join(paths_a[steps[1]], "out.json"), b'{"total": 7}')  # same size, other bytes
    assert rehash_mismatches(paths_b["lab/b"], manifest_b)
    steps_b = chain(counter, last=5)
    executor = Executor(lab_b, backend="local", experiment_name="chain")
    from marin.execution import ExecutorRunError

    with pytest.raises(ExecutorRunError) as caught:
        executor.run([steps_b[-1]])
    outcome = caught.value.result.outcomes[steps_b[-1]]
    assert outcome.status == "FAILED" and "changed since it was reused" in outcome.error
    assert len(invocations(counter)) == 1, "the step did not run on changed bytes"


def test_rerun_of_a_record_that_referenced_inputs_references_them_again_and_refuses_changed_bytes(tmp_path):
    from marin.tools.rerun import rerun_main

    source = str(tmp_path / "lab-a")
    steps = chain(str(tmp_path / "calls-a"))
    paths_a = Executor(source, backend="local", experiment_name="chain").run([steps[-1]])
    result, paths_b = run_b(str(tmp_path / "lab-b"), source, str(tmp_path / "calls-b"), mode="reference")
    record_b = result.record_path
    lab_c = str(tmp_path / "lab-c")
    assert rerun_main(record_b, lab_c, ["--backend", "local"], code="checkout") == 0
    line = json.loads(
        read_text(join(lab_c, "experiments", record_b.rsplit("/", 1)[-1]).removesuffix(".json") + ".runs.jsonl")
    )
    outcomes = {k.split("-")[0]: v["outcome"] for k, v in line["steps"].items()}
    assert outcomes == {"lab/a": "REUSED", "lab/b": "REUSED", "lab/c": "SUCCESS"}
    assert (
        line["external_inputs"]
        == json.loads(read_text(record_b.removesuffix(".json") + ".runs.jsonl"))["external_inputs"]
    )

    write_bytes(join(paths_a[steps[1]], "out.json"), b'{"total": 7}')  # same size, other bytes
    lab_d = str(tmp_path / "lab-d")
    assert rerun_main(record_b, lab_d, ["--backend", "local"], code="checkout") == 1
    line = json.loads(
        read_text(join(lab_d, "experiments", record_b.rsplit("/", 1)[-1]).removesuffix(".json") + ".runs.jsonl")
    )
    refused = next(v for k, v in line["steps"].items() if k.startswith("lab/b-"))
    assert (
        refused["outcome"] == "FAILED" and "the external input the record used is gone or changed" in refused["error"]
    )
    assert not exists(join(paths_b["lab/b"].replace(str(tmp_path / "lab-b"), lab_d), "out.json")), "it did not run"


def test_marin_rerun_passes_the_cache_flags_to_the_run(monkeypatch):
    from marin import cli
    from marin.tools import rerun

    seen = {}
    monkeypatch.setattr(rerun, "rerun_main", lambda record, prefix, args, code: seen.update(args=args) or 0)
    argv = ["rerun", "r.json", "--prefix", "p", "--cache_from", "a", "--cache_from", "gs://b/lab"]
    assert cli.main([*argv, "--cache_mode", "reference", "--cache_code_changed"]) == 0
    from marin.execution.main import cache_from_of, parse_main_args

    cache = cache_from_of(parse_main_args(seen["args"]))
    assert cache.sources[1] == "gs://b/lab" and cache.sources[0].endswith("/a")
    assert cache.mode == "reference" and cache.code_changed
