"""A real S3 API on loopback, in-process: moto's server mode, for the demo and the tests.

It speaks the S3 HTTP protocol on ``127.0.0.1`` (an ephemeral port), so boto3, Polars and the
Airflow connection all talk to it exactly as they would to AWS; nothing leaves the machine.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Credentials moto accepts; not secrets.
ACCESS_KEY = "embedded-access-key"
SECRET_KEY = "embedded-secret-key"  # noqa: S105 - moto's local server takes any key
REGION = "us-east-1"


class LocalS3:
    """An in-process S3 server. ``with LocalS3() as s3: s3.endpoint_url``."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url = ""

    def start(self) -> LocalS3:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Any:
        from evaluation.storage import s3_client

        return s3_client(self.endpoint_url, access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION)

    def create_bucket(self, name: str) -> None:
        """Create a bucket (idempotent)."""
        client = self.client()
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if name not in existing:
            client.create_bucket(Bucket=name)

    def environment(self) -> dict[str, str]:
        """Environment that points boto3 (and an Airflow ``aws_default`` connection) here."""
        import json

        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(
                {
                    "conn_type": "aws",
                    "login": ACCESS_KEY,
                    "password": SECRET_KEY,
                    "extra": {"endpoint_url": self.endpoint_url, "region_name": REGION},
                }
            ),
        }


@contextmanager
def local_s3_environment(*buckets: str) -> Iterator[LocalS3]:
    """A running LocalS3 with ``buckets`` created and its environment set for the duration."""
    with LocalS3() as s3:
        for bucket in buckets:
            s3.create_bucket(bucket)
        saved = {k: os.environ.get(k) for k in s3.environment()}
        os.environ.update(s3.environment())
        try:
            yield s3
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
