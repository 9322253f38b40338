"""Starting `marin browse` as a user would, waiting for the address it prints, and stopping it."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

URL = re.compile(r"marin browse: (http://\S+/)")


def answering(url: str, proc: subprocess.Popen, deadline: float) -> str:
    """`url` once it answers (the address is printed before the server listens)."""
    while True:
        try:
            urllib.request.urlopen(url, timeout=10).read()
            return url
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def browsing(argv: list[str], env: dict | None = None, cwd: str | None = None, timeout_s: float = 120) -> Iterator[str]:
    """Runs `argv` (a `marin browse ... --port 0` command) and yields the base URL it prints; stops it after."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    try:
        seen: list[str] = []
        deadline = time.monotonic() + timeout_s
        for line in proc.stdout:
            seen.append(line)
            match = URL.search(line)
            if match:
                yield answering(match.group(1), proc, deadline)
                return
            if time.monotonic() > deadline:
                break
        raise RuntimeError(f"{' '.join(argv)} printed no address:\n{''.join(seen)}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> int:
    """`python -m tests.browse_process TEXT CMD...`: CMD serves, its first page shows TEXT, then it stops."""
    expected, command = argv[0], argv[1:]
    with browsing(command) as url:
        body = urllib.request.urlopen(url, timeout=60).read().decode()
    if expected not in body:
        print(f"{url} does not show {expected!r}:\n{body[:2000]}", file=sys.stderr)
        return 1
    print(f"{' '.join(command)}: {url} answered and shows {expected!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
