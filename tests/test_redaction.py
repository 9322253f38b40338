"""Credentials on the command line never reach storage; a credential in the stored patch refuses the run."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.provenance import probe, redaction
from marin.provenance.redaction import (
    REDACTED,
    CredentialInPatchError,
    find_in_patch,
    redact_argv,
    redact_text,
)
from marin.storage import url_to_fs, write_bytes

# Built by concatenation so that this file does not itself hold credential-shaped strings.
PASSWORD = "hunter2-" + "correct-horse"
URL_PASSWORD = "S3cr3t" + "UrlPass"
HF_TOKEN = "hf_" + "Ab1" * 12
AWS_KEY = "AKIA" + "ABCDEFGHIJ234567"
GH_TOKEN = "ghp_" + "x9" * 18
SECRETS = (PASSWORD, URL_PASSWORD, HF_TOKEN, AWS_KEY, GH_TOKEN)

ARGV = [
    "wrapper.py",
    "--password",
    PASSWORD,
    f"--ray_address=ray://admin:{URL_PASSWORD}@head:10001",
    "--note",
    f"see {HF_TOKEN}",
    "--tokenizer",
    "gpt2",
    "--max_tokens",
    "100",
    AWS_KEY,
    f"--github_token={GH_TOKEN}",
]


def test_redact_argv_replaces_secret_flags_url_passwords_and_token_shapes():
    command = redact_argv(ARGV)
    joined = " ".join(command.argv)
    for secret in SECRETS:
        assert secret not in joined
    assert command.argv[:3] == ["wrapper.py", "--password", "<redacted>"]
    assert command.argv[3] == "--ray_address=ray://admin:<redacted>@head:10001"
    assert command.argv[6:10] == ["--tokenizer", "gpt2", "--max_tokens", "100"]
    assert command.redacted == [
        "--password",
        "--ray_address (URL password)",
        "--note (a Hugging Face token)",
        "argv[10] (an AWS access key id)",
        "--github_token",
    ]
    assert redact_argv(["x.py", "--dry_run", "--api-key", "--prefix", "p"]).argv[2:4] == ["--api-key", "--prefix"]
    assert redact_argv(["x.py", "--secret=<your-secret>"]).redacted == []
    assert PASSWORD not in redact_text(f"a log line with {PASSWORD} in it")


def test_find_in_patch_names_file_and_line():
    patch = (
        "diff --git a/conf.py b/conf.py\n--- a/conf.py\n+++ b/conf.py\n@@ -10,3 +10,4 @@\n ctx\n"
        f"-old\n+TOKEN = '{HF_TOKEN}'\n ctx\n+URL = 'https://user:<password>@host'\n"
    ).encode()
    findings = find_in_patch(patch)
    assert [str(f) for f in findings] == ["conf.py:11: a Hugging Face token"]


@dataclass(frozen=True)
class ChattyConfig:
    value: int = 0
    """Versioned payload."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def chatty_step(config: ChattyConfig) -> None:
    """Prints and logs its process's command line (as a careless step would)."""
    print("argv:", sys.argv)
    logging.getLogger("chatty").warning("started with %s", " ".join(sys.argv))
    write_bytes(f"{config.output_path}/out.txt", b"done\n")


def _all_bytes(prefix: str) -> dict[str, bytes]:
    fs, root = url_to_fs(prefix)
    return {path: fs.cat_file(path) for path in fs.find(root, withdirs=False)}


def test_no_secret_reaches_a_file_under_the_prefix(prefix, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(ARGV))
    step = ExecutorStep("redact/chatty", chatty_step, ChattyConfig(value=versioned(1)))
    executor = Executor(prefix, backend="local", experiment_name="redact")
    result = executor.run([step])
    files = _all_bytes(prefix)
    assert any(p.endswith(".log") for p in files) and any(p.endswith(".runs.jsonl") for p in files)
    for path, data in files.items():
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret!r} in {path}"
    fs, _ = url_to_fs(prefix)
    record = json.loads(fs.cat_file(result.record_path.split("://")[-1] if "://" in prefix else result.record_path))
    expected = redact_argv(ARGV)
    assert record["command"] == expected.argv and record["redacted"] == expected.redacted
    log = next(data for path, data in files.items() if path.endswith(".log")).decode()
    assert "argv:" in log and "<redacted>" in log


def _checkout(path, content: str) -> None:
    path.mkdir()
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-C", str(path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "settings.py").write_text("A = 1\n")
    subprocess.run([*git, "add", "settings.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    (path / "settings.py").write_text(content)


def test_a_credential_in_the_patch_refuses_the_run_unless_allowed(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "_GIT_STATES", {})
    monkeypatch.setattr(probe, "project_root", lambda: os.getcwd())
    checkout = tmp_path / "repo"
    _checkout(checkout, f"A = 1\nKEY = '{AWS_KEY}'\n")
    monkeypatch.chdir(checkout)
    step = ExecutorStep("redact/patch", chatty_step, ChattyConfig(value=versioned(2)))
    prefix = str(tmp_path / "prefix")
    with pytest.raises(
        CredentialInPatchError, match=r"settings.py:2: an AWS access key id.*--allow_credentials_in_patch"
    ):
        Executor(prefix, backend="local", experiment_name="patch").run([step])
    assert not os.path.exists(prefix) or not any(files for _, _, files in os.walk(prefix))
    result = Executor(prefix, backend="local", experiment_name="patch", allow_credentials_in_patch=True).run([step])
    assert os.path.exists(result.record_path)


def test_the_refusal_is_one_line_from_an_experiment_script(tmp_path):
    checkout = tmp_path / "repo"
    _checkout(checkout, f"A = 1\nTOKEN = '{GH_TOKEN}'\n")
    script = checkout / "exp.py"
    script.write_text(
        "from tests.test_redaction import ChattyConfig, chatty_step\n"
        "from marin.execution import ExecutorStep, executor_main, versioned\n"
        "executor_main([ExecutorStep('redact/script', chatty_step, ChattyConfig(value=versioned(3)))])\n"
    )
    run = subprocess.run(
        [sys.executable, str(script), "--prefix", str(tmp_path / "p"), "--backend", "local"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2, run.stderr
    assert "settings.py:2: a GitHub token" in run.stderr and "Traceback" not in run.stderr


_FRAGMENTS = [
    "hf_" + "Zq9" * 11,
    "ASIA" + "QRSTUVWXYZ765432",
    "gho_" + "k7" * 19,
    "https://bot:" + "Pw" * 5 + "@mirror",
    "https://user:<password>@host",
    "-----BEGIN RSA " + "PRIVATE KEY-----",
    "AIza" + "B" * 35,
    "github_pat_" + "a" * 22,
    "step tokenize: 12 shards",
    " ",
    "://",
    ":",
    "@",
    "hf_",
    "Authorization: Bearer " + "Zz9" * 4,
    "password=" + "s3cr" * 3,
    "api_key: " + "k3y" * 4,
    "sk-" + "Q" * 24,
]
"""Shapes no other test passes to `redact_argv`, so no remembered value redacts them first."""


def _every_pass(text: str) -> str:
    """`text` through every shape's pass, none skipped for want of a trigger."""
    for value in sorted(redaction._known, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return redaction._apply(text, list(redaction._shapes()), False, [])


_LINE = st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=6), max_size=6).map("".join)


@given(_LINE)
@settings(max_examples=400, deadline=None)
def test_a_log_line_is_redacted_as_by_every_shape_pass_whether_or_not_a_trigger_occurs(line):
    """`redact_text` tries a shape only where one of its literal triggers occurs; the result is every pass's."""
    assert redact_text(line) == _every_pass(line)


@given(st.lists(_LINE, min_size=1, max_size=20))
@settings(max_examples=100, deadline=None)
def test_a_long_text_is_redacted_line_by_line_as_each_line_would_be(lines):
    """A text longer than LONG_TEXT is redacted only on the lines holding a trigger: each line as alone."""
    padded = [line.replace("\n", " ").replace("\r", " ") for line in lines] + ["." * redaction.LONG_TEXT]
    assert redact_text("\n".join(padded)) == "\n".join(_every_pass(line) for line in padded)
