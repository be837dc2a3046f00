"""A real S3 API on loopback, in-process: moto's server mode, for the demo and the tests.

It speaks the S3 HTTP protocol on ``127.0.0.1`` (an ephemeral port), so boto3, Polars and the
Airflow connection all talk to it exactly as they would to AWS; nothing leaves the machine. The
same server answers STS and IAM, so a connection can assume a role there (:meth:`LocalS3.connection`
with ``role_arn``), and :meth:`LocalS3.assumed_roles` tells which roles were assumed, when.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

    from evaluation.storage import S3Access

#: Credentials moto accepts; not secrets.
ACCESS_KEY = "embedded-access-key"
SECRET_KEY = "embedded-secret-key"  # noqa: S105 - moto's local server takes any key
REGION = "us-east-1"
#: The account moto serves.
ACCOUNT_ID = "123456789012"


@dataclass(frozen=True)
class AssumedRole:
    """One AssumeRole answered by the server: the role, the key it handed out, and until when."""

    role_arn: str
    access_key_id: str
    expiration: dt.datetime  #: UTC


class LocalS3:
    """An in-process S3 server. ``with LocalS3() as s3: s3.endpoint_url``."""

    def __init__(self) -> None:
        # moto: test-only and slow to import, only when a local S3 starts
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

    def session(self) -> boto3.Session:
        """A boto3 session with the server's static keys."""
        # boto3: only once the local S3 is used
        import boto3

        from evaluation.storage import share_models  # Polars: only once the local S3 is used

        share_models()
        return boto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def access(self, session: boto3.Session | None = None) -> S3Access:
        """S3 on this server through ``session`` (default: :meth:`session`)."""
        # Polars via storage: only when a client is built
        from evaluation.storage import s3_access

        return s3_access(session or self.session(), endpoint_url=self.endpoint_url)

    def create_bucket(self, name: str) -> None:
        """Create a bucket (idempotent)."""
        client = self.access().client
        if name not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
            client.create_bucket(Bucket=name)

    def create_role(self, name: str) -> str:
        """An IAM role (idempotent) that the account's users may assume; returns its ARN."""
        iam = self.session().client("iam", endpoint_url=self.endpoint_url)
        trust = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:root"}, "Action": "sts:AssumeRole"}]}
        try:
            return str(iam.get_role(RoleName=name)["Role"]["Arn"])
        except iam.exceptions.NoSuchEntityException:
            return str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"])

    def assumed_roles(self) -> list[AssumedRole]:
        """Every AssumeRole the server has answered, oldest first (moto's record of them)."""
        # moto: test-only and slow to import, only when a role is looked up
        from moto.backends import get_backend

        return [AssumedRole(role.role_arn, role.access_key_id, role.expiration.replace(tzinfo=dt.UTC))
                for role in get_backend("sts")[ACCOUNT_ID]["aws"].assumed_roles]

    def connection(self, *, role_arn: str | None = None, assume_role_kwargs: dict[str, Any] | None = None,
                   endpoint_url: str | None = None, **extra_fields: Any) -> dict[str, Any]:
        """An Airflow ``aws`` connection to this server (or to ``endpoint_url``, a proxy in front
        of it) with the static keys; with ``role_arn`` it assumes that role through the server's
        STS (``assume_role_kwargs`` such as ``DurationSeconds``). ``extra_fields`` go into its
        extra as they are (``config_kwargs``...)."""
        extra: dict[str, Any] = {"endpoint_url": endpoint_url or self.endpoint_url, "region_name": REGION,
                                 **extra_fields}
        if role_arn:
            # The provider calls STS at AWS's own endpoint for assume-role unless the STS service
            # config names one.
            extra.update(role_arn=role_arn, service_config={"sts": {"endpoint_url": self.endpoint_url}},
                         assume_role_kwargs=assume_role_kwargs or {})
        return {"conn_type": "aws", "login": ACCESS_KEY, "password": SECRET_KEY, "extra": extra}

    def environment(self) -> dict[str, str]:
        """Environment that points boto3 (and an Airflow ``aws_default`` connection) here."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(self.connection()),
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
