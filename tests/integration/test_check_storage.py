"""airflow-init's wait for the input and output prefixes (scripts/check_storage.py), on a real S3 API."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import pytest

from evaluation.testing.s3 import LocalS3
from scripts.check_storage import StorageNotReady, locations, main, wait_for_buckets
from tests.factories import FakeClock
from tests.reliability.faulty_proxy import FaultyProxy, S3FaultPlan


@pytest.fixture()
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        yield server


@pytest.mark.parametrize(("uris", "expected"), [
    (["s3://logs/raw", "s3://results/curated"], [("logs", "raw/"), ("results", "curated/")]),
    (["s3://same/raw/", "s3://same/curated", "s3://same/raw"], [("same", "raw/"), ("same", "curated/")]),
    (["s3://logs/raw", "/var/lib/results", ""], [("logs", "raw/")]),
    (["s3://whole-bucket"], [("whole-bucket", "")]),
    (["file:///tmp/x"], []),
])
def test_the_prefixes_of_the_s3_uris(uris: list[str], expected: list[tuple[str, str]]) -> None:
    assert locations(uris) == expected


def test_existing_buckets_answer_at_once(s3: LocalS3) -> None:
    s3.create_bucket("logs")
    s3.create_bucket("results")
    clock = FakeClock()
    wait_for_buckets(s3.access().client, [("logs", "raw/"), ("results", "curated/")], connection_id="aws_default", timeout_s=60,
                     clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_a_bucket_made_while_waiting_is_waited_for(s3: LocalS3) -> None:
    clock = FakeClock()
    name = f"late-{uuid.uuid4().hex[:12]}"  # moto's buckets outlive a server: a name of its own

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 3:  # the dev profile's bucket job gets there
            s3.create_bucket(name)

    wait_for_buckets(s3.access().client, [(name, "raw/")], connection_id="aws_default", timeout_s=60,
                     clock=clock, sleep=sleep)
    assert len(clock.sleeps) == 3


def test_a_bucket_still_missing_at_the_deadline_is_named(s3: LocalS3) -> None:
    clock = FakeClock()
    with pytest.raises(StorageNotReady, match=r"bucket nowhere through the aws_default connection: .*does not exist"):
        wait_for_buckets(s3.access().client, [("nowhere", "raw/")], connection_id="aws_default", timeout_s=10,
                         clock=clock, sleep=clock.sleep)
    assert clock.now >= 10


def test_main_checks_the_configured_buckets_through_the_connection(
    s3: LocalS3, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    s3.create_bucket("logs")
    connection = {"conn_type": "aws", "login": s3.environment()["AWS_ACCESS_KEY_ID"],
                  "password": s3.environment()["AWS_SECRET_ACCESS_KEY"],
                  "extra": {"endpoint_url": s3.endpoint_url, "region_name": "us-east-1"}}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(connection))
    for key in [k for k in os.environ if k.startswith("AWS_") and "CHECKSUM" not in k]:
        monkeypatch.delenv(key)  # the connection alone reaches the store
    monkeypatch.setenv("EVALUATION_INPUT_URI", "s3://logs/raw")
    monkeypatch.setenv("EVALUATION_OUTPUT_URI", "s3://logs/curated")
    assert main(["--timeout", "5"]) == 0
    assert "bucket logs, prefix 'raw/' answers through the aws_default connection" in capsys.readouterr().out
    monkeypatch.setenv("EVALUATION_OUTPUT_URI", "s3://missing-results/curated")
    assert main(["--timeout", "0"]) == 1
    assert "bucket missing-results through the aws_default connection" in capsys.readouterr().err


def test_a_refusal_names_the_permission_and_the_prefix_at_once(s3: LocalS3) -> None:
    s3.create_bucket("logs")
    clock = FakeClock()
    refused = FaultyProxy(s3.endpoint_url, S3FaultPlan(slow_down=0, server_error=0, reset=0),
                          refuse=lambda _key: (403, "AccessDenied", "Access Denied"))
    with refused as proxy, pytest.raises(StorageNotReady) as raised:
        wait_for_buckets(_client(s3, proxy.endpoint_url), [("logs", "raw/")],
                         connection_id="aws_default", timeout_s=60, clock=clock, sleep=clock.sleep)
    assert "s3:ListBucket on arn:aws:s3:::logs with s3:prefix 'raw/*'" in str(raised.value)
    assert clock.sleeps == []  # a refusal is not waited on
    # the check is a list of one key under the prefix: what the tasks' policy allows
    assert [(r.method, r.path) for r in proxy.requests] == [("GET", "/logs?list-type=2&prefix=raw%2F&max-keys=1&encoding-type=url")]


def _client(s3: LocalS3, endpoint_url: str) -> object:
    from evaluation.storage import s3_access

    return s3_access(s3.session(), endpoint_url=endpoint_url).client
