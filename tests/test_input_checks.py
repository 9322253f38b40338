"""Plain inputs are checked before anything runs: `marin plan` and the start of a run fail naming step and field.

Before, a missing tokenizer folder failed five seconds into the tokenize step with a hub error about
repo ids, and a missing evaluation set after the whole training run. Each case runs on a local
prefix and on the bucket emulators (the `prefix` fixture).
"""

from __future__ import annotations

import os

import pytest

from experiments.defaults import default_download, default_eval, default_tokenize, default_train
from marin.execution import Executor, ExecutorStep, PlanError, versioned
from marin.execution.input_check import MissingInputError
from marin.storage import exists, join, write_bytes
from tests.cli_support import marin
from tests.executor_steps import CountConfig, count_step


def _independent(tmp_path) -> ExecutorStep:
    return ExecutorStep("t/independent", count_step, CountConfig(value=versioned(1), counter_path=str(tmp_path / "c")))


def _nothing_ran(prefix: str, tmp_path) -> bool:
    return not (tmp_path / "c").exists() and not exists(join(prefix, "experiments"))


def test_a_missing_tokenizer_folder_fails_the_run_before_any_step_runs(prefix, tmp_path):
    write_bytes(join(prefix, "docs", "part-00000.jsonl.gz"), b"")
    tokenized = default_tokenize("t", join(prefix, "docs"), join(prefix, "nowhere", "tok"))
    executor = Executor(prefix, backend="local")
    assert executor.plan([tokenized])[tokenized].startswith(prefix)
    message = rf"step 'tokenized/t': input tokenizer \(tokenizer folder\) {prefix}/nowhere/tok does not exist"
    with pytest.raises(MissingInputError, match=message):
        executor.run([_independent(tmp_path), tokenized])
    assert _nothing_ran(prefix, tmp_path)
    with pytest.raises(MissingInputError, match=message):
        executor.run([_independent(tmp_path), tokenized], dry_run=True)
    with pytest.raises(MissingInputError, match=message):
        executor.check_inputs([tokenized])


def test_a_folder_that_is_not_a_tokenizer_fails_naming_what_it_lacks(prefix, tmp_path):
    write_bytes(join(prefix, "docs", "part-00000.jsonl.gz"), b"")
    write_bytes(join(prefix, "tok", "README"), b"not a tokenizer")
    tokenized = default_tokenize("t", join(prefix, "docs"), join(prefix, "tok"))
    with pytest.raises(
        MissingInputError, match=r"input tokenizer \(tokenizer folder\) .*/tok holds none of tokenizer.json"
    ):
        Executor(prefix, backend="local").run([tokenized])
    write_bytes(join(prefix, "tok", "tokenizer.json"), b"{}")
    Executor(prefix, backend="local").check_inputs([tokenized])


def test_a_missing_evaluation_set_fails_before_training_starts(prefix, tmp_path):
    write_bytes(join(prefix, "tokenized", "train", "shard_ledger.json"), b"{}")
    trained = default_train("t", join(prefix, "tokenized"), num_train_steps=2)
    evaluation = default_eval("t", trained, {"heldout": join(prefix, "heldout"), "same": join(prefix, "tokenized")})
    with pytest.raises(
        PlanError, match=r"step 'evaluation/t': input datasets\.heldout \(tokenized dataset\) .* does not exist"
    ):
        Executor(prefix, backend="local").run([_independent(tmp_path), evaluation])
    assert _nothing_ran(prefix, tmp_path) and not exists(Executor(prefix).plan([trained])[trained])


def test_every_missing_input_is_listed_and_steps_inputs_are_not_checked(prefix):
    source = default_download("d", join(prefix, "no-source"))
    tokenized = default_tokenize("t", source, join(prefix, "no-tok"), validation=join(prefix, "no-val"))
    with pytest.raises(MissingInputError) as info:
        Executor(prefix, backend="local").check_inputs([tokenized])
    lines = str(info.value).splitlines()
    assert lines[0] == "missing inputs:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "step 'raw/d'",
        "step 'tokenized/t'",
        "step 'tokenized/t'",
    ]
    assert "input source (download source)" in lines[1] and "input validation_path (documents)" in lines[3]


def test_remote_download_sources_are_not_checked_and_succeeded_steps_are_not_rechecked(tmp_path):
    prefix = str(tmp_path / "lab")
    Executor(prefix, backend="local").check_inputs([default_download("d", "https://example.invalid/x.jsonl.gz")])
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.jsonl").write_text('{"id": "1", "text": "x"}\n')
    step = default_download("d", str(tmp_path / "src"), glob="*.jsonl")
    Executor(prefix, backend="local").run([step])
    (tmp_path / "src" / "a.jsonl").unlink()
    (tmp_path / "src").rmdir()
    Executor(prefix, backend="local").run([step])
    with pytest.raises(MissingInputError, match="src does not exist"):
        Executor(prefix, backend="local").run([default_download("d2", str(tmp_path / "src"))])


def test_marin_plan_fails_naming_the_step_and_the_field(tmp_path):
    script = tmp_path / "exp.py"
    script.write_text(
        "from experiments.defaults import default_tokenize\n"
        "from marin.execution import executor_main\n"
        f"step = default_tokenize('t', {str(tmp_path)!r}, {str(tmp_path / 'nowhere')!r})\n"
        "if __name__ == '__main__':\n"
        "    executor_main(steps=[step])\n"
    )
    for command in ("plan", "run"):
        result = marin(command, str(script), "--prefix", str(tmp_path / "lab"), "--backend", "local")
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines()[-1] == (
            f"error: step 'tokenized/t': input tokenizer (tokenizer folder) {tmp_path}/nowhere does not exist"
        )
    assert not os.path.exists(tmp_path / "lab")


def test_an_input_that_cannot_be_read_is_named_with_the_reason(tmp_path):
    tokenized = default_tokenize("t", str(tmp_path), "nosuchscheme://bucket/tok")
    with pytest.raises(
        MissingInputError, match=r"input tokenizer \(tokenizer folder\) nosuchscheme://bucket/tok cannot be read \("
    ):
        Executor(str(tmp_path / "lab"), backend="local").check_inputs([tokenized])


def test_the_tokenize_step_called_without_the_executor_names_a_missing_tokenizer_too(tmp_path):
    from marin.processing.tokenize import TokenizeConfig, tokenize
    from tests.data_docs import write_shard

    write_shard(tmp_path / "docs" / "part-00000.jsonl.gz", [{"id": "1", "text": "x", "source": "t", "metadata": {}}])
    config = TokenizeConfig(
        input_path=str(tmp_path / "docs"), tokenizer=str(tmp_path / "tok"), output_path=str(tmp_path / "o")
    )
    with pytest.raises(FileNotFoundError, match=r"TokenizeConfig.tokenizer: .*/tok is not a tokenizer folder"):
        tokenize(config)
