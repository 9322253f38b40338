"""The probe: secrets passed to an experiment the ways people pass them, and not one of them in the prefix.

Seventeen distinct secrets go through every route a credential takes into a run: the command line (ten
flags and shapes), a failed step's exception text, a download URL's user-info against a real HTTP server
that demands it, a config URL's user-info, a credential-named environment variable a step prints, a
credential-named config field, a script outside the checkout, and, on the Ray backend, a subprocess's output
and an exception. Then every file under the prefix, gzip members included, is searched for each secret.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from marin.download.download import DownloadConfig, download
from marin.execution import THIS_OUTPUT_PATH, Executor, ExecutorStep, versioned
from marin.execution.executor import ExecutorRunError
from marin.execution.planning import PlanError
from marin.processing.documents import write_json
from marin.provenance.redaction import CredentialInPatchError
from marin.provenance.references import resolve_reference


def _secret(kind: str, n: int) -> str:
    """A distinct secret (built here, so that this file holds no credential-shaped string)."""
    return f"{kind}{n:02d}" + "Q7z" + "Xw4" * 4


AWS_ID = "AK" + "IA" + "PROBE" + "0123456789A"
HF_SHAPED = "h" + "f_" + "Pr0be" * 7
S = {
    "dbpassword": _secret("db", 1),
    "creds": _secret("cr", 2),
    "p": _secret("pw", 3),
    "bearer": _secret("br", 4),
    "x_api_key": _secret("xk", 5),
    "api_token": _secret("at", 6),
    "hf_token": _secret("hf", 7),
    "aws_secret": _secret("aw", 8),
    "note": AWS_ID,
    "mirror": _secret("mi", 10),
    "dsn": _secret("ds", 11),
    "download": _secret("dl", 12),
    "config_url": _secret("cu", 13),
    "env": _secret("en", 14),
    "config_field": _secret("cf", 15),
    "outside_script": HF_SHAPED,
    "ray": _secret("ry", 17),
}
assert len(set(S.values())) == 17

ARGV = [
    "probe.py",
    "--dbpassword",
    S["dbpassword"],
    "--creds",
    S["creds"],
    "-p",
    S["p"],
    "--header",
    f"Authorization: Bearer {S['bearer']}",
    f"--x-api-key={S['x_api_key']}",
    "--api_token",
    S["api_token"],
    "--hf_token",
    S["hf_token"],
    f"--aws_secret_access_key={S['aws_secret']}",
    "--note",
    f"rotate {S['note']} next week",
    "--mirror",
    f"https://probe:{S['mirror']}@mirror.example/",
]


def leaks(prefix: str, secrets: dict[str, str]) -> list[str]:
    """`route in path` for every secret found in a file under `prefix` (gzip files read decompressed too)."""
    found = []
    for folder, _, names in os.walk(prefix):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                data = f.read()
            if data[:2] == b"\x1f\x8b":
                data += gzip.decompress(data)
            found += [
                f"{route} in {os.path.relpath(path, prefix)}" for route, s in secrets.items() if s.encode() in data
            ]
    return found


class _AuthHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head: bool):
        expected = "Basic " + base64.b64encode(self.server.credentials.encode()).decode()
        body = self.server.files.get(self.path.lstrip("/"))
        status = 401 if self.headers.get("Authorization") != expected else 200 if body is not None else 404
        self.server.seen.append(status)
        body = body if status == 200 else b"no"
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="probe"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


class BasicAuthServer:
    """A file server on 127.0.0.1 that answers 401 to any request without `credentials` ("user:password")."""

    def __init__(self, files: dict[str, bytes], credentials: str):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _AuthHandler)
        self.httpd.daemon_threads = True
        self.httpd.files, self.httpd.credentials, self.httpd.seen = files, credentials, []
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@dataclass(frozen=True)
class ProbeConfig:
    value: int = 0
    """Versioned payload."""
    url: str = ""
    """A URL the step uses (versioned when wrapped)."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


@dataclass(frozen=True)
class KeyedConfig:
    api_key: str = ""
    """A credential in a config: refused at plan time."""
    output_path: str = THIS_OUTPUT_PATH
    """This step's output folder."""


def failing_connect(config: ProbeConfig) -> None:
    """Fails as a database driver does: its message holds the connection string and the command line."""
    raise ConnectionError(f"cannot connect ({os.environ['PROBE_DSN']}) for {sys.argv}")


def chatty_mirror(config: ProbeConfig) -> None:
    """Prints its config and an environment variable, and writes stats naming its mirror."""
    print("config:", config)
    print("service token:", os.environ["PROBE_SERVICE_TOKEN"])
    write_json(f"{config.output_path}/stats.json", {"mirror": config.url, "documents": 3})


def echo_and_fail(config: ProbeConfig) -> None:
    """Hands its URL to a subprocess (bytes written straight to the descriptors), then fails naming it."""
    subprocess.run(["echo", "fetching", config.url], check=True)
    raise RuntimeError(f"fetch failed: {config.url}")


def test_no_credential_reaches_the_prefix_by_any_route_on_the_local_backend(tmp_path, monkeypatch):
    prefix = str(tmp_path / "prefix")
    monkeypatch.setattr(sys, "argv", list(ARGV))
    monkeypatch.setenv("PROBE_DSN", f"host=db user=lab password={S['dsn']}")
    monkeypatch.setenv("PROBE_SERVICE_TOKEN", S["env"])
    data = b'{"text": "behind basic auth"}\n'
    problems: list[str] = []
    with BasicAuthServer({"data/docs.jsonl": data}, f"probe:{S['download']}") as server:
        steps = [
            ExecutorStep("probe/connect", failing_connect, ProbeConfig(value=versioned(1))),
            ExecutorStep(
                "probe/download",
                download,
                DownloadConfig(source=f"http://probe:{S['download']}@{server.host}/data", files=("docs.jsonl",)),
            ),
            ExecutorStep(
                "probe/mirror",
                chatty_mirror,
                ProbeConfig(value=versioned(2), url=versioned(f"https://lab:{S['config_url']}@mirror.example/x")),
            ),
        ]
        executor = Executor(prefix, backend="local", experiment_name="probe")
        with pytest.raises(ExecutorRunError) as failed:
            executor.run(steps)
        outcomes = {s.name: o.status for s, o in failed.value.result.outcomes.items()}
    problems += [
        f"{name} ended {status}"
        for name, status in outcomes.items()
        if (status == "FAILED") != (name == "probe/connect")
    ]
    downloaded = executor.plan(steps)[steps[1]]
    with open(f"{downloaded}/docs.jsonl", "rb") as f:
        assert f.read() == data

    try:
        Executor(prefix, backend="local", experiment_name="probe").run(
            [ExecutorStep("probe/keyed", failing_connect, KeyedConfig(api_key=S["config_field"]))]
        )
        problems.append("a credential-named config field was accepted")
    except ExecutorRunError:
        problems.append("a credential-named config field was accepted")
    except PlanError as exc:
        assert "'probe/keyed'" in str(exc) and "api_key" in str(exc) and "environment" in str(exc)

    script = tmp_path / "outside" / "outside_experiment.py"
    script.parent.mkdir()
    script.write_text(
        "from tests.test_credential_probe import ProbeConfig\n"
        f"HUB = {HF_SHAPED!r}\n"
        "def outside_step(config: ProbeConfig) -> None:\n"
        "    print('ran')\n"
    )
    outside = resolve_reference(f"{script}:outside_step")
    try:
        Executor(prefix, backend="local", experiment_name="outside").run(
            [ExecutorStep("probe/outside", outside, ProbeConfig(value=versioned(3)))]
        )
        problems.append("a script outside the checkout holding a token was stored")
    except CredentialInPatchError as exc:
        assert f"{script}:2: a Hugging Face token" in str(exc)

    local = {k: v for k, v in S.items() if k != "ray"}
    problems += leaks(prefix, local)
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems)
    runs = next(p for p in _files(prefix) if p.endswith(".runs.jsonl"))
    error = json.loads(open(runs).read().splitlines()[-1])["steps"]
    assert any("cannot connect" in (s["error"] or "") for s in error.values())
    info = json.loads(open(f"{downloaded}/.executor_info").read())
    assert info["config"]["source"] == f"http://{server.host}/data"
    assert json.loads(open(f"{downloaded}/provenance.json").read())["source"] == f"http://{server.host}/data"


def _files(prefix: str) -> list[str]:
    return [os.path.join(folder, n) for folder, _, names in os.walk(prefix) for n in names]


def test_no_credential_reaches_the_prefix_from_a_ray_step(tmp_path, ray_cluster, monkeypatch):
    prefix = str(tmp_path / "prefix")
    monkeypatch.setattr(sys, "argv", ["probe.py"])
    step = ExecutorStep(
        "probe/ray", echo_and_fail, ProbeConfig(value=versioned(4), url=f"https://svc:{S['ray']}@internal.example/x")
    )
    with pytest.raises(ExecutorRunError) as failed:
        Executor(prefix, backend="ray", experiment_name="probe_ray").run([step])
    assert [o.status for o in failed.value.result.outcomes.values()] == ["FAILED"]
    log = next(p for p in _files(prefix) if p.endswith(".log"))
    text = open(log).read()
    assert "fetching https://svc:<redacted>@internal.example/x" in text and "fetch failed" in text
    assert leaks(prefix, {"ray": S["ray"]}) == []
