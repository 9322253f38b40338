"""moto's S3 server with atomic conditional writes, as real S3 has them (started by tests/emulators.py).

moto checks `If-Match` / `If-None-Match` and then writes, as two steps, on a threaded server: two puts
conditional on the same ETag can both pass the check and both succeed, the second silently replacing
the first. Real S3 decides a conditional write atomically. Under CPU load the server thread is often
preempted between the check and the write, and `append_line` from several processes then lost a line
(measured: 6 of 30 rounds of six writers lost one, each time with two puts accepted on one ETag). Here
S3's put and delete run under one lock, so the check and the write are one step again.

    python tests/moto_server.py -H 127.0.0.1 -p PORT      # the same arguments as `python -m moto.server`

`MARIN_TEST_S3_WRITE_DELAY_S` makes every object write sleep first, between moto's check and its
write: tests/test_s3_emulator.py widens the window with it to show that the lock closes it.
"""

from __future__ import annotations

import functools
import os
import threading
import time


def make_conditional_writes_atomic() -> None:
    from moto.s3.responses import S3Response

    lock = threading.Lock()

    def atomic(method):
        @functools.wraps(method)
        def locked(self, *args, **kwargs):
            with lock:
                return method(self, *args, **kwargs)

        return locked

    S3Response.put_object = atomic(S3Response.put_object)
    S3Response.delete_object = atomic(S3Response.delete_object)


def delay_writes(seconds: float) -> None:
    from moto.s3.models import S3Backend

    write = S3Backend.put_object

    @functools.wraps(write)
    def slow_write(self, *args, **kwargs):
        time.sleep(seconds)
        return write(self, *args, **kwargs)

    S3Backend.put_object = slow_write


if __name__ == "__main__":
    from moto.server import main

    make_conditional_writes_atomic()
    if os.environ.get("MARIN_TEST_S3_WRITE_DELAY_S"):
        delay_writes(float(os.environ["MARIN_TEST_S3_WRITE_DELAY_S"]))
    main()
