"""The S3 emulator decides a conditional write atomically, as S3 does (tests/moto_server.py).

Plain moto checks `If-Match` and then writes: two puts on one ETag could both succeed, and
`append_line` from several processes lost lines under CPU load. Here every write is slowed between
the check and the write, which lets both puts through on plain moto; the emulator must still let
exactly one win.
"""

from __future__ import annotations

import threading

from tests.emulators import S3_ENV, start_s3


def test_two_puts_conditional_on_one_etag_have_exactly_one_winner(tmp_path, monkeypatch):
    import botocore.session
    from botocore.config import Config

    monkeypatch.setenv("MARIN_TEST_S3_WRITE_DELAY_S", "0.3")
    emulator = start_s3(tmp_path)
    try:
        client = botocore.session.get_session().create_client(
            "s3",
            endpoint_url=emulator.url,
            region_name=S3_ENV["AWS_DEFAULT_REGION"],
            aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
            config=Config(retries={"total_max_attempts": 1}, s3={"addressing_style": "path"}),
        )
        etag = client.put_object(Bucket=emulator.bucket, Key="log", Body=b"a\n")["ETag"]
        start = threading.Barrier(2)
        answers: dict[bytes, int] = {}

        def put(body: bytes) -> None:
            start.wait()
            try:
                client.put_object(Bucket=emulator.bucket, Key="log", Body=body, IfMatch=etag)
                answers[body] = 200
            except client.exceptions.ClientError as exc:
                answers[body] = exc.response["ResponseMetadata"]["HTTPStatusCode"]

        threads = [threading.Thread(target=put, args=(body,)) for body in (b"a\nb\n", b"a\nc\n")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(answers.values()) == [200, 412]
        winner = next(body for body, status in answers.items() if status == 200)
        assert client.get_object(Bucket=emulator.bucket, Key="log")["Body"].read() == winner
    finally:
        emulator.stop()
