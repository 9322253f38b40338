"""What an evaluation step's log holds: its own lines, not a warning per absent model part or progress-bar codes."""

from __future__ import annotations

import io
import os

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep
from marin.execution.capture import LogCleaner
from tests.training_fixtures import build_tokenized, corpus, reference_run


def test_the_log_cleaner_keeps_a_bars_last_state_drops_escape_codes_and_redacts():
    out = io.StringIO()
    cleaner = LogCleaner(out)
    for state in range(3):
        cleaner.write(f"\rsets: {state}/2 |\x1b[32m#\x1b[0m|")
    cleaner.write("\n")
    cleaner.write("\x1b[Aplain line\r\n")
    cleaner.write("url ray://admin:" + "Pw" * 4 + "@head\n")
    cleaner.write("unfinished")
    cleaner.finish()
    assert out.getvalue() == "sets: 2/2 |#|\nplain line\nurl ray://admin:<redacted>@head\nunfinished\n"


def test_an_evaluation_steps_log_has_no_leaf_warnings_nor_terminal_codes(tmp_path_factory, tmp_path):
    root = tmp_path_factory.getbasetemp() / "training"
    run = reference_run(root)
    data = corpus(root / "corpus")
    texts = ["To be, or not to be: that is the question.", "Exeunt all but Hamlet."]
    held_out = build_tokenized(tmp_path / "held_out", data["tokenizer"], texts, texts)
    from marin.evaluation.evaluate import EvalConfig, evaluate

    step = ExecutorStep(
        "evaluation/log",
        evaluate,
        EvalConfig(checkpoint=str(run), datasets={"lines": str(held_out)}, output_path=THIS_OUTPUT_PATH),
    )
    result = Executor(str(tmp_path / "lab"), backend="local", experiment_name="eval_log").run([step])
    logs = os.path.join(result[step], ".executor_logs")
    (name,) = os.listdir(logs)
    text = open(os.path.join(logs, name), encoding="utf-8").read()
    assert "lines: loss" in text, text[-2000:]
    assert "Unknown leaf type" not in text
    assert "\x1b" not in text and "\r" not in text
