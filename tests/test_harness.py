"""The lm-eval-harness step on a trained tiny model: scores against a direct computation, outputs, offline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marin.evaluation.harness import HarnessConfig, harness
from marin.evaluation.tasks import SHIPPED
from tests.training_fixtures import reference_run


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return reference_run(tmp_path_factory.getbasetemp() / "training")


@pytest.fixture(scope="module")
def scored(run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harness")
    harness(HarnessConfig(checkpoint=str(run), tasks=["marin_shakespeare"], output_path=str(out)))
    return out


@pytest.fixture(scope="module")
def model_and_tokenizer(run):
    from levanter.compat.hf_checkpoints import load_tokenizer

    from marin.training.config import LlamaModelConfig
    from marin.training.model_io import device_mesh, load_model

    info = json.loads((run / "train_info.json").read_text())
    with device_mesh():
        model = load_model(info["final_checkpoint"], LlamaModelConfig(**info["model"]), info["tokenizer"])
    return model, load_tokenizer(info["tokenizer"])


_WIDTH = 64


@pytest.fixture(scope="module")
def forward():
    """One causal forward of a single sequence, right-padded to the model's 64 positions (causal attention
    never looks right, so the padding changes nothing before it) and compiled once."""
    import equinox as eqx
    import haliax as hax
    from levanter.layers.attention import AttentionMask

    @eqx.filter_jit
    def logits_of(model, tokens):
        return model(hax.named(tokens, ("position",)), attn_mask=AttentionMask.causal()).array

    return logits_of


def log_probs(forward, model, token_ids: list[int]) -> np.ndarray:
    """log p(next token) at every position of `token_ids`, the softmax taken in float64."""
    assert len(token_ids) <= _WIDTH
    padded = np.zeros(_WIDTH, dtype=np.int32)
    padded[: len(token_ids)] = token_ids
    from marin.training.model_io import device_mesh

    with device_mesh():
        logits = np.asarray(forward(model, padded), dtype=np.float64)[: len(token_ids)]
    logits -= logits.max(axis=-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))


def docs(task: str) -> list[dict]:
    return [json.loads(line) for line in (Path(SHIPPED) / "shakespeare" / f"{task}.jsonl").read_text().splitlines()]


def samples(out: Path, task: str) -> list[dict]:
    return [json.loads(line) for line in (out / "samples" / f"{task}.jsonl").read_text().splitlines()]


def test_multiple_choice_accuracy_equals_a_direct_computation_of_each_choices_loglikelihood(
    scored, model_and_tokenizer, forward
):
    model, tok = model_and_tokenizer
    encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    correct, per_choice = [], []
    for doc in docs("next_line"):
        context = encode(doc["context"])
        lls = []
        for choice in doc["choices"]:
            continuation = encode(doc["context"] + "\n" + choice)[len(context) :]
            tokens = [tok.bos_token_id, *context, *continuation]
            assert len(tokens) <= 65, "every request fits the model's 64 positions: one forward is the reference"
            logp = log_probs(forward, model, tokens[:-1])
            lls.append(sum(logp[i - 1, tokens[i]] for i in range(len(tokens) - len(continuation), len(tokens))))
        per_choice.append(lls)
        correct.append(int(np.argmax(lls)) == doc["label"])

    metrics = json.loads((scored / "metrics.json").read_text())["tasks"]["shakespeare_next_line"]
    assert metrics["metrics"]["acc"] == pytest.approx(np.mean(correct), abs=1e-12)
    assert 0.0 < metrics["metrics"]["acc"] < 1.0
    written = samples(scored, "shakespeare_next_line")
    assert [s["doc_id"] for s in written] == list(range(40))
    for sample, lls, ok in zip(written, per_choice, correct, strict=True):
        assert [r[0][0] for r in sample["resps"]] == pytest.approx(lls, rel=1e-5)
        assert sample["acc"] == float(ok)


def test_generation_is_greedy_cut_at_the_stop_string_and_scored_by_exact_match(scored, model_and_tokenizer, forward):
    model, tok = model_and_tokenizer
    written = samples(scored, "shakespeare_line_end")
    for doc, sample in list(zip(docs("line_end"), written, strict=True))[:4]:
        tokens = [tok.bos_token_id, *tok(doc["prompt"], add_special_tokens=False)["input_ids"]]
        generated: list[int] = []
        while len(generated) < 16:
            token = int(np.argmax(log_probs(forward, model, tokens + generated)[-1]))
            if token == tok.eos_token_id:
                break
            generated.append(token)
            if "\n" in tok.decode(generated):
                break
        assert sample["resps"] == [[tok.decode(generated).split("\n")[0]]]
    metrics = json.loads((scored / "metrics.json").read_text())["tasks"]["shakespeare_line_end"]["metrics"]
    assert metrics["exact_match"] == np.mean([s["resps"][0][0] == s["target"] for s in written])


def test_the_folder_records_every_task_its_version_and_every_document(scored, run, tmp_path):
    summary = json.loads((scored / "metrics.json").read_text())
    assert sorted(summary["tasks"]) == ["shakespeare_line_end", "shakespeare_next_line", "shakespeare_speaker"]
    for name, task in summary["tasks"].items():
        assert task["version"] == 1.0 and task["documents"] == 40 and task["num_fewshot"] == 0, name
        assert len(samples(scored, name)) == 40
    assert summary["step"] == 39 and summary["parameter_count"] > 0 and summary["lm_eval_version"] == "0.4.13"
    configs = json.loads((scored / "task_configs.json").read_text())
    assert (
        configs["shakespeare_speaker"]["metadata"]["config_source"] == "marin/evaluation/tasks/shakespeare/speaker.yaml"
    )

    again = tmp_path / "again"
    harness(HarnessConfig(checkpoint=str(run), tasks=["shakespeare_next_line"], limit=8, output_path=str(again)))
    once_more = tmp_path / "once_more"
    harness(HarnessConfig(checkpoint=str(run), tasks=["shakespeare_next_line"], limit=8, output_path=str(once_more)))
    for name in ("metrics.json", "task_configs.json", "samples/shakespeare_next_line.jsonl"):
        assert (again / name).read_bytes() == (once_more / name).read_bytes(), name
    assert len(samples(again, "shakespeare_next_line")) == 8


def test_a_task_whose_data_come_from_the_hub_fails_at_once_offline_naming_it(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "hub.yaml").write_text(
        "task: needs_the_hub\ndataset_path: marin-tests/not-on-this-machine\noutput_type: multiple_choice\n"
        "test_split: test\ndoc_to_text: '{{q}}'\ndoc_to_choice: '{{c}}'\ndoc_to_target: 0\n"
    )
    config = HarnessConfig(checkpoint="unused", tasks=["needs_the_hub"], task_paths=[str(tasks)], output_path="x")
    with pytest.raises(RuntimeError, match=r"'needs_the_hub' reads its data from the Hugging Face hub.*offline"):
        harness(config)


def test_an_unknown_task_is_an_error_naming_the_field():
    with pytest.raises(ValueError, match=r"harness\.tasks: \['no_such_task'\] not found"):
        harness(HarnessConfig(checkpoint="unused", tasks=["no_such_task"], output_path="x"))


def test_the_shipped_task_data_are_what_the_builder_makes():
    from marin.evaluation.tasks.build import FOLDER, build

    for name, text in build().items():
        assert (FOLDER / name).read_text(encoding="utf-8") == text, name


def test_in_training_tasks_without_an_interval_are_an_error_naming_the_field(tmp_path):
    from tests.training_fixtures import tiny_train_config

    with pytest.raises(ValueError, match=r"train\.harness_every_steps must be > 0 with harness_tasks"):
        tiny_train_config(str(tmp_path), {"d": str(tmp_path)}, harness_tasks=["shakespeare_next_line"])


def test_the_in_training_hook_replaces_levanters_harness_only_while_its_training_runs():
    from types import SimpleNamespace

    import levanter.eval_harness
    from levanter.main.train_lm import TrainLmConfig

    from marin.evaluation.harness_hook import harness_during_training

    original = levanter.eval_harness.lm_eval_harness
    plain = SimpleNamespace(harness_tasks=[], harness_every_steps=0, harness_limit=None)
    lev = TrainLmConfig()
    with harness_during_training(plain, lev) as run:
        assert run is lev and levanter.eval_harness.lm_eval_harness is original
    scored = SimpleNamespace(harness_tasks=["shakespeare_next_line"], harness_every_steps=5, harness_limit=3)
    with pytest.raises(RuntimeError, match="training failed"):
        with harness_during_training(scored, lev) as run:
            assert run.eval_harness_steps == 5 and run.eval_harness.max_examples == 3
            assert levanter.eval_harness.lm_eval_harness is not original
            raise RuntimeError("training failed")
    assert levanter.eval_harness.lm_eval_harness is original and lev.eval_harness is None


def test_training_imports_nothing_from_evaluation_not_even_late():
    """The in-training scorer is a callback handed to `train`; no module of marin.training imports
    marin.evaluation, at the top or inside a function."""
    import ast

    training = Path(__file__).resolve().parents[1] / "marin" / "training"
    found = []
    for source in sorted(training.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{source.name}:{node.lineno} {n}" for n in names if n.startswith("marin.evaluation")]
    assert found == []


def test_a_training_that_scores_tasks_runs_as_train_with_harness_and_plain_train_refuses_it(tmp_path):
    from experiments.defaults_training import default_train
    from marin.evaluation.harness_hook import train_with_harness
    from marin.training.train import train
    from tests.training_fixtures import tiny_train_config

    scored = default_train("t", str(tmp_path), harness_tasks=["shakespeare_next_line"], harness_every_steps=5)
    assert scored.fn is train_with_harness and default_train("t", str(tmp_path)).fn is train
    config = tiny_train_config(
        str(tmp_path / "out"), {"d": str(tmp_path)}, harness_tasks=["shakespeare_next_line"], harness_every_steps=5
    )
    with pytest.raises(
        ValueError, match=r"train\.harness_tasks .* fn=marin\.evaluation\.harness_hook\.train_with_harness"
    ):
        train(config)
    assert not (tmp_path / "out").exists()
