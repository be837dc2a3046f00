"""Wait until the DAGs' input and output prefixes answer through the ``aws_default`` connection.

Run by airflow-init (docker-compose.yml) before the scheduler starts, in both worlds: with the
``dev`` profile it waits for the bundled store and its bucket job (which airflow-init cannot
depend on, since that job exists only in the profile); against AWS it proves, before the first
run, that the connection's credentials reach the buckets of ``EVALUATION_INPUT_URI`` and
``EVALUATION_OUTPUT_URI``. Each is checked with the request the tasks make: a list of one key
under the URI's prefix (ListObjectsV2, ``Prefix=<prefix>/``, ``MaxKeys=1``), which a policy that
grants ``s3:ListBucket`` only under the prefixes used allows (a HeadBucket would need it on the
whole bucket). A bucket that does not exist yet, or a store that does not answer yet, is asked
again until the deadline; a refusal (403: wrong keys, a role without ``s3:ListBucket`` under the
prefix) fails at once. Exits 1 naming the bucket, the prefix, the connection and the cause.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

#: The variables naming the DAGs' default input and output.
URI_VARIABLES = ("EVALUATION_INPUT_URI", "EVALUATION_OUTPUT_URI")
CONNECTION_ID = "aws_default"
#: Seconds between two looks at a bucket that does not answer yet.
POLL_S = 2.0


class StorageNotReady(RuntimeError):
    """A bucket is refused, or still missing or unreachable at the deadline."""


def locations(uris: Iterable[str]) -> list[tuple[str, str]]:
    """The distinct (bucket, prefix) of the ``s3://`` URIs among `uris`, in order (others are
    local); the prefix ends with ``/`` ("" for a bucket's root)."""
    found: list[tuple[str, str]] = []
    for uri in uris:
        parts = urlsplit(uri)
        prefix = parts.path.strip("/")
        where = (parts.netloc, f"{prefix}/" if prefix else "")
        if parts.scheme in ("s3", "s3a") and parts.netloc and where not in found:
            found.append(where)
    return found


def wait_for_buckets(
    client: object,
    where: Iterable[tuple[str, str]],
    *,
    connection_id: str,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once a list of one key under each (bucket, prefix) of `where` answers through
    `client` (an empty prefix lists the bucket's root)."""
    deadline = clock() + timeout_s
    for bucket, prefix in where:
        while True:
            try:
                client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)  # type: ignore[attr-defined]
                print(f"ok      bucket {bucket}, prefix {prefix!r} answers through the {connection_id} connection")
                break
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                code = exc.response.get("Error", {}).get("Code", "")
                if status == 403 or code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                    raise StorageNotReady(
                        f"bucket {bucket}, prefix {prefix!r}: access refused ({code or status}) with the "
                        f"{connection_id} connection: check its keys, session token or role, and that the policy "
                        f"allows s3:ListBucket on arn:aws:s3:::{bucket} with s3:prefix {prefix + '*'!r} "
                        "(docs/deploy.md)"
                    ) from exc
                cause = f"{code or status}: the bucket does not exist (yet)"
            except BotoCoreError as exc:
                cause = f"the store does not answer: {exc}"
            if clock() >= deadline:
                raise StorageNotReady(
                    f"bucket {bucket} through the {connection_id} connection: {cause}; gave up after {timeout_s:g} s")
            sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait (default 180)")
    args = parser.parse_args(argv)
    names = locations(os.environ.get(variable, "") for variable in URI_VARIABLES)
    if not names:
        print("no s3:// input or output configured: nothing to check")
        return 0
    # The provider's hook: every credential form of the connection (keys, session token,
    # role_arn, instance or pod role) and its endpoint and region apply here as in the tasks.
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    client = S3Hook(aws_conn_id=CONNECTION_ID).get_conn()
    try:
        wait_for_buckets(client, names, connection_id=CONNECTION_ID, timeout_s=args.timeout)
    except StorageNotReady as exc:
        print(f"FAILED  {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
