"""Identity of the experiment helpers: every input, a plain path or another step, is in the version.

Two experiments that differ only in what a step reads must never share its output folder (issue 13):
`default_train("t", "/data/A")` and `default_train("t", "/data/B")` once planned to one path, and the
second would have silently reused a model trained on other data. The configs now declare their
inputs and versioned fields (marin/stepkit/config.py); these tests sweep every `default_*` helper with
plain paths and with steps, and pin the tutorial's hashes, which the move kept as they were.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import pytest

from experiments.defaults import (
    default_dedup,
    default_download,
    default_eval,
    default_filter,
    default_tokenize,
    default_tokenizer,
    default_train,
    scaling_ladder,
    shakespeare_source,
)
from marin.execution import Executor, ExecutorStep, PlanError, output_path_of
from marin.stepkit.config import NEVER, StepConfig, input_spec, version_rule


def _plain(tag: str) -> str:
    return f"/data/{tag}"


def _step(tag: str) -> ExecutorStep:
    return shakespeare_source(plays=(tag,))


TRAINED = default_train("base", "/data/tokenized")


def _ladder_forecast(**kwargs) -> ExecutorStep:
    return scaling_ladder(
        "lad", kwargs.pop("tokenized", "/data/tokenized"), sizes=[32, 48, 64], vocab_size=512, **kwargs
    ).forecast


# (helper and argument, build(input) -> the step whose output path must depend on that input)
HELPERS: dict[str, Callable[[object], ExecutorStep]] = {
    "download.source": lambda x: default_download("d", x),
    "filter.documents": lambda x: default_filter("f", x),
    "dedup.documents": lambda x: default_dedup("d", x),
    "tokenizer.documents": lambda x: default_tokenizer("t", x),
    "tokenize.documents": lambda x: default_tokenize("t", x, "/data/tok"),
    "tokenize.tokenizer": lambda x: default_tokenize("t", "/data/docs", x),
    "tokenize.validation": lambda x: default_tokenize("t", "/data/docs", "/data/tok", validation=x),
    "train.tokenized": lambda x: default_train("t", x),
    "train.mixture": lambda x: default_train("t", {"a": "/data/tokenized", "b": x}),
    "train.tokenizer": lambda x: default_train("t", "/data/tokenized", tokenizer=x),
    "train.initialize_from": lambda x: default_train("t", "/data/tokenized", initialize_from=x),
    "eval.datasets": lambda x: default_eval("e", TRAINED, {"heldout": x}),
    "eval.trained": lambda x: default_eval("e", default_train("base", x), {"heldout": "/data/tokenized"}),
    "scaling_ladder.tokenized": lambda x: _ladder_forecast(tokenized=x),
    "scaling_ladder.eval_datasets": lambda x: _ladder_forecast(eval_datasets={"heldout": x}),
    "scaling_ladder.tokenizer": lambda x: _ladder_forecast(tokenizer=x),
}


def _path(step: ExecutorStep) -> str:
    return Executor("/lab", backend="local").plan([step])[step]


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_different_plain_input_paths_give_different_output_paths(helper):
    build = HELPERS[helper]
    assert _path(build(_plain("A"))) != _path(build(_plain("B")))
    assert _path(build(_plain("A"))) == _path(build(_plain("A")))


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_different_input_steps_give_different_output_paths(helper):
    build = HELPERS[helper]
    assert _path(build(_step("hamlet"))) != _path(build(_step("macbeth")))
    assert _path(build(_step("hamlet"))) != _path(build(output_path_of(_step("hamlet"), "sub")))
    assert _path(build(_step("hamlet"))) != _path(build(_plain("hamlet")))


def test_every_helper_config_declares_its_identity():
    """Each helper's config is a StepConfig, so its fields are versioned unless the class says otherwise."""
    for helper, build in HELPERS.items():
        for planned in Executor("/lab", backend="local").plan_dag([build(_plain("A"))]).steps:
            step = planned.step
            assert isinstance(step.config, StepConfig), f"{helper}: {step.name} has a {type(step.config).__name__}"
            for f in dataclasses.fields(step.config):
                if input_spec(f) is not None:
                    assert version_rule(f) != NEVER, f"{type(step.config).__name__}.{f.name} is an unversioned input"


def test_an_unversioned_field_does_not_change_the_hash_and_a_declared_one_does():
    assert _path(default_dedup("d", "/data/A", workers=1)) == _path(default_dedup("d", "/data/A", workers=8))
    assert _path(default_train("t", "/d", wandb_mode="disabled")) == _path(default_train("t", "/d"))
    assert _path(default_train("t", "/d", epochs=3)) != _path(default_train("t", "/d"))
    assert _path(default_train("t", "/d", precision="bf16")) != _path(default_train("t", "/d"))


# The tutorial's output folders as they were before configs declared their fields (commit ae437a7):
# moving the knowledge of what is versioned into the configs changed no hash. The ladder's rungs and
# forecast are those of the ladder the tutorial defines (docs/evaluation.md: how it was chosen).
TUTORIAL = {
    "tiny_lm": [
        "checkpoints/tiny-shakespeare-1bf96781",
        "deduped/shakespeare-f46e5ff0",
        "evaluation/tiny-shakespeare-51c1b881",
        "filtered/shakespeare-d2d65c58",
        "raw/shakespeare-5170ae8c",
        "sources/shakespeare-all-92b8a682",
        "tokenized/shakespeare-a736312d",
        "tokenizers/shakespeare-bpe1024-1f6cb84d",
    ],
    "tiny_ladder": [
        "checkpoints/tiny-shakespeare-ladder/d28-l2-33f9701f",
        "checkpoints/tiny-shakespeare-ladder/d32-l2-471fadf7",
        "checkpoints/tiny-shakespeare-ladder/d40-l2-3dfc6bbb",
        "checkpoints/tiny-shakespeare-ladder/d48-l2-5fe7fa30",
        "checkpoints/tiny-shakespeare-ladder/d56-l2-4a106c8e",
        "checkpoints/tiny-shakespeare-ladder/d64-l2-75efb7c9",
        "checkpoints/tiny-shakespeare-ladder/d72-l2-67685f83",
        "checkpoints/tiny-shakespeare-ladder/d80-l2-5e9e9077",
        "deduped/shakespeare-f46e5ff0",
        "evaluation/tiny-shakespeare-ladder/d28-l2-ae6f5a15",
        "evaluation/tiny-shakespeare-ladder/d32-l2-3c175fdd",
        "evaluation/tiny-shakespeare-ladder/d40-l2-a03e70d8",
        "evaluation/tiny-shakespeare-ladder/d48-l2-3c1158db",
        "evaluation/tiny-shakespeare-ladder/d56-l2-263c5796",
        "evaluation/tiny-shakespeare-ladder/d64-l2-9689b11c",
        "evaluation/tiny-shakespeare-ladder/d72-l2-af059f76",
        "evaluation/tiny-shakespeare-ladder/d80-l2-2c9e46f4",
        "filtered/shakespeare-d2d65c58",
        "forecast/tiny-shakespeare-ladder-556b6dd6",
        "raw/shakespeare-5170ae8c",
        "sources/shakespeare-all-92b8a682",
        "tokenized/shakespeare-a8a8f834",
        "tokenizers/shakespeare-bpe320-96fa955a",
    ],
    "hello_world": ["hello/data-02ea9faa", "hello/stats-2d4c618e"],
}


def test_tutorial_hashes_are_those_of_before_configs_declared_their_fields():
    from experiments.tutorial import hello_world, tiny_ladder, tiny_lm

    roots = {
        "tiny_lm": [tiny_lm.build()["eval"]],
        "tiny_ladder": [tiny_ladder.build().forecast],
        "hello_world": [hello_world.stats],
    }
    for name, steps in roots.items():
        paths = Executor("/lab", backend="local").plan(steps).values()
        assert sorted(os.path.relpath(p, "/lab") for p in paths) == TUTORIAL[name], name


def test_a_bad_value_in_a_helper_config_fails_plan_naming_the_step():
    step = default_tokenizer("tiny", "/data/docs", vocab_size=100)
    with pytest.raises(PlanError, match=r"step 'tokenizers/tiny': invalid config: .*vocab_size must exceed 258"):
        Executor("/lab", backend="local").plan([step])
    ladder_step = default_train("t", "/data/tokenized", num_train_steps=1)
    with pytest.raises(PlanError, match=r"step 'checkpoints/t': invalid config: train\.num_train_steps must be >= 2"):
        Executor("/lab", backend="local").plan([ladder_step])


def test_the_step_library_declares_identity_without_importing_the_executor():
    import subprocess
    import sys

    modules = [
        "marin.download.download",
        "marin.download.shipped_corpus",
        "marin.processing.filter",
        "marin.processing.dedup",
        "marin.processing.train_tokenizer",
        "marin.processing.tokenize",
        "marin.training.config",
        "marin.training.train",
        "marin.evaluation.evaluate",
        "marin.evaluation.forecast",
    ]
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(sorted(m for m in sys.modules if m.startswith('marin.execution')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
