"""Each route a credential takes into a prefix, closed one by one: flags, log lines, configs, download URLs,
subprocess output, records, the browser's pages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
from starlette.testclient import TestClient

from marin.browser.app import create_app
from marin.download.download import DownloadConfig, download
from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, ResourceConfig, versioned
from marin.execution.executor import ExecutorRunError
from marin.execution.failure_logs import last_error_line
from marin.execution.planning import PlanError
from marin.execution.provenance import dump_json
from marin.provenance.redaction import credential_env_name, credential_name, redact_argv, redact_text
from tests.test_credential_probe import BasicAuthServer, _secret

SECRET = _secret("rt", 1)


def test_the_flags_people_pass_secrets_with_are_redacted_and_ordinary_flags_kept():
    flags = [
        ["--dbpassword", SECRET],
        ["--creds", SECRET],
        ["-p", SECRET],
        ["--header", f"Authorization: Bearer {SECRET}"],
        [f"--x-api-key={SECRET}"],
        ["--api_token", SECRET],
        ["--hf_token", SECRET],
        [f"--aws_secret_access_key={SECRET}"],
        ["--mirror", f"https://user:{SECRET}@host/"],
        ["--clientSecret", SECRET],
    ]
    for flag in flags:
        command = redact_argv(["x.py", *flag])
        assert SECRET not in " ".join(command.argv), flag
        assert command.redacted, flag
    kept = ["x.py", "--max_tokens", "4096", "--tokenizer", "gpt2", "--eos_token", "</s>", "--passes", "3"]
    assert redact_argv(kept).argv == kept and redact_argv(kept).redacted == []


def test_names_that_say_credential_and_names_that_do_not():
    for name in ("api_key", "token", "password", "secret", "dbPassword", "x-api-key", "hf_token", "creds", "auth"):
        assert credential_name(name), name
    for name in ("max_tokens", "tokenizer", "eos_token", "pad_token", "text_key", "passes", "num_train_tokens"):
        assert not credential_name(name), name
    assert credential_env_name("OPENAI_API_KEY") and credential_env_name("AWS_SECRET_ACCESS_KEY")
    assert credential_env_name("MY_SERVICE_TOKEN") and credential_env_name("DB_PASSWORD_FILE")
    assert not credential_env_name("TOKENIZERS_PARALLELISM") and not credential_env_name("HOME")
    assert not credential_env_name("PWD") and not credential_env_name("RAY_AUTH_MODE")


@pytest.mark.parametrize(
    "line, kept",
    [
        (f"connect failed: host=db password={SECRET}", "connect failed: host=db password="),
        (f"DB(user='lab', password='{SECRET}', max_tokens=4096)", "max_tokens=4096"),
        (f'{{"api_key": "{SECRET}", "text_key": "text"}}', '"text_key": "text"'),
        (f"curl -H 'Authorization: Basic {SECRET}'", "Authorization: Basic <redacted>"),
        (f"X-Api-Key: {SECRET}", "X-Api-Key: <redacted>"),
        (f"GET https://bot:{SECRET}@mirror/x", "https://bot:<redacted>@mirror/x"),
    ],
)
def test_a_log_line_loses_credentials_and_keeps_the_rest(line, kept):
    redacted = redact_text(line)
    assert SECRET not in redacted and kept in redacted
    for ordinary in ("tokenize: 12 shards in 3.1 s", '"google-auth": "2.63.0"', "eos_token=</s> passes=3"):
        assert redact_text(ordinary) == ordinary


def test_a_record_stays_valid_json_when_a_secret_sits_next_to_an_escaped_quote():
    data = dump_json({"error": f'login failed: password={SECRET}"x', "steps": [1, 2]})
    record = json.loads(data)
    assert SECRET not in data.decode() and record["steps"] == [1, 2] and "password=" in record["error"]


def fail_with_a_secret(config) -> None:
    raise RuntimeError(f'login failed: password={SECRET}"x')


def test_the_run_log_stays_valid_json_and_secret_free_when_a_step_fails_with_a_secret(tmp_path):
    step = ExecutorStep("routes/fails", fail_with_a_secret, None)
    executor = Executor(str(tmp_path / "p"), backend="local")
    with pytest.raises(ExecutorRunError):
        executor.run([step])
    (runs,) = (tmp_path / "p" / "experiments").glob("*.runs.jsonl")
    text = runs.read_text()
    line = json.loads(text.splitlines()[-1])
    assert SECRET not in text
    (outcome,) = line["steps"].values()
    assert outcome["outcome"] == "FAILED" and "password=" in outcome["error"]


@dataclass(frozen=True)
class Inner:
    password: str | None = None
    """A nested credential."""


@dataclass(frozen=True)
class Service:
    url: str = ""
    """Where the service is."""
    hf_token: str | None = None
    """Read from the environment when None."""
    token_env: str = "HF_TOKEN"
    """The variable holding the token: a name, not a credential."""
    eos_token: str = "</s>"
    """A tokenizer's token, not a credential."""
    note: str = ""
    """Free text."""
    inner: Inner = Inner()
    """Nested settings."""
    mirrors: tuple[str, ...] = ()
    """Other places to fetch from."""
    headers: dict[str, str] | None = None
    """Extra request headers."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def remember_url(config: Service) -> None:
    """Writes whether it was given the URL's credentials (never the URL itself)."""
    with open(f"{config.output_path}/had_credentials.txt", "w") as f:
        f.write(str(SECRET in config.url))


@pytest.mark.parametrize(
    "config, resources, field",
    [
        (Service(hf_token=SECRET), None, "hf_token"),
        (Service(inner=Inner(password=SECRET)), None, "inner.password"),
        (Service(note="rotate " + "AK" + "IA" + "ROUTE0123456789A"), None, "note (it holds an AWS access key id)"),
        (Service(), ResourceConfig(env={"WANDB_API_KEY": SECRET}), "resources.env['WANDB_API_KEY']"),
        (Service(mirrors=("http://a/x", "http://b/x?t=" + "hf_" + "R" * 34)), None, "mirrors[1] (it holds"),
        (Service(headers={"X-Extra": "Bearer " + "q" * 40}), None, "headers['X-Extra'] (it holds"),
        (Service(note=versioned("rotate " + "AK" + "IA" + "ROUTE0123456789A")), None, "note (it holds"),
    ],
)
def test_a_credential_in_a_config_is_refused_at_plan_time_naming_the_field(tmp_path, config, resources, field):
    step = ExecutorStep("routes/service", remember_url, config, resources=resources)
    with pytest.raises(PlanError, match=r"step 'routes/service'.*environment") as refused:
        Executor(str(tmp_path / "p"), backend="local").plan([step])
    assert field in str(refused.value)
    assert not os.path.exists(tmp_path / "p")


def test_a_url_with_user_info_is_hashed_and_stored_without_it_and_the_step_gets_it(tmp_path):
    prefix = str(tmp_path / "p")
    config = Service(url=versioned(f"https://lab:{SECRET}@mirror.example/x"))
    plain = Service(url=versioned("https://mirror.example/x"))
    executor = Executor(prefix, backend="local", experiment_name="routes")
    step, bare = ExecutorStep("routes/url", remember_url, config), ExecutorStep("routes/url", remember_url, plain)
    assert executor.plan([step])[step] == executor.plan([bare])[bare]
    out = executor.run([step]).output_paths[step]
    with open(f"{out}/had_credentials.txt") as f:
        assert f.read() == "True"
    info = json.loads(open(f"{out}/.executor_info").read())
    assert info["config"]["url"] == info["version"]["config"]["url"] == "https://mirror.example/x"


def test_a_download_url_without_user_info_takes_its_credentials_from_netrc(tmp_path, monkeypatch):
    """What a rerun from the record does: the record's URL has no user-info, the machine's netrc has them."""
    data = b'{"text": "behind basic auth"}\n'
    with BasicAuthServer({"data/docs.jsonl": data}, f"lab:{SECRET}") as server:
        config = DownloadConfig(source=f"http://{server.host}/data", files=("docs.jsonl",))
        monkeypatch.setenv("NETRC", str(tmp_path / "missing"))
        with pytest.raises(
            PermissionError, match=r"docs.jsonl: .* answered HTTP 401: give the host's credentials in ~/.netrc"
        ):
            download(DownloadConfig(**{**config.__dict__, "output_path": str(tmp_path / "without")}))
        netrc = tmp_path / "netrc"
        netrc.write_text(f"machine 127.0.0.1 login lab password {SECRET}\n")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
        out = tmp_path / "with"
        provenance = download(DownloadConfig(**{**config.__dict__, "output_path": str(out)}))
    assert (out / "docs.jsonl").read_bytes() == data
    assert provenance["source"] == f"http://{server.host}/data" and 401 in server.httpd.seen


CAPTURED = """
import os, subprocess, sys
from marin.execution.capture import capture_process
with capture_process(sys.argv[1]):
    print("python:", os.environ["PROBE_DEPLOY_TOKEN"], flush=True)
    subprocess.run(["sh", "-c", "echo shell: $PROBE_DEPLOY_TOKEN; echo url: $PROBE_URL >&2"])
    os.write(1, ("raw: " + os.environ["PROBE_DEPLOY_TOKEN"] + "\\n").encode())
print("after the capture")
"""


def test_a_process_capture_masks_what_subprocesses_print(tmp_path):
    log = tmp_path / "001.log"
    password = "pw" + "12345"
    env = {**os.environ, "PROBE_DEPLOY_TOKEN": SECRET, "PROBE_URL": f"https://u:{password}@host/"}
    run = subprocess.run([sys.executable, "-c", CAPTURED, str(log)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text = log.read_text()
    assert SECRET not in text and "pw12345" not in text
    for line in ("python: <redacted>", "shell: <redacted>", "url: https://u:<redacted>@host/", "raw: <redacted>"):
        assert line in text, text
    assert run.stdout == "after the capture\n"


def test_the_browser_redacts_a_log_written_before_redaction(tmp_path):
    """A prefix written by an older marin, or copied in by hand: pages and log tails are redacted as served."""
    logs = tmp_path / "lab" / "routes" / "old-0123abcd" / ".executor_logs"
    logs.mkdir(parents=True)
    (logs / "001.log").write_text(f"INFO connecting with password={SECRET}\n")
    (logs.parent / ".executor_status").write_text("FAILED")
    client = TestClient(create_app([str(tmp_path / "lab")]))
    tail = client.get("/api/log/0/routes/old-0123abcd/.executor_logs/001.log").json()
    assert tail["text"] == "INFO connecting with password=<redacted>\n"
    page = client.get("/file/0/routes/old-0123abcd/.executor_logs/001.log")
    assert page.status_code == 200 and SECRET not in page.text and "password=&lt;redacted&gt;" in page.text


def test_the_failed_steps_summary_line_is_redacted_from_a_log_written_before_redaction(tmp_path):
    log = tmp_path / "001.log"
    log.write_text(f"starting\nConnectionError: login refused for user=lab password={SECRET}\n")
    assert last_error_line(str(log)) == "ConnectionError: login refused for user=lab password=<redacted>"
