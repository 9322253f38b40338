"""The browser tests' in-process server leaves the process's logging alone.

uvicorn's default logging setup (`logging.config.dictConfig`) closes every logging handler of the
process. In the test session that closed absl's handler, which closed the stream it captured when absl
was imported (pytest's capture file, under an earlier test), and pytest then failed a later test with
"I/O operation on closed file". `ServerThread` starts uvicorn without touching logging.
"""

from __future__ import annotations

import logging
import urllib.request

from tests.browser_support import ServerThread


class _ClosingWatch(logging.Handler):
    closed = False

    def emit(self, record: logging.LogRecord) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        super().close()


async def _hello(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


def test_server_thread_does_not_close_the_processs_logging_handlers():
    watch = _ClosingWatch()
    try:
        with ServerThread(_hello) as server:
            assert urllib.request.urlopen(server.url, timeout=10).read() == b"hello"
        assert not watch.closed, "starting the test server closed a logging handler it does not own"
    finally:
        watch.close()
