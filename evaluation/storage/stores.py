"""The stores every read and write goes through: :class:`LocalStore` (a directory) and
:class:`S3Store` (boto3), the :class:`Store` protocol they share, and how S3 is reached."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from evaluation.contract.errors import StorageError
from evaluation.storage._botocore import share_models

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config


_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".json": "application/json", ".parquet": "application/vnd.apache.parquet"}


class StaleWrite(StorageError):
    """A conditional write found the object changed since the writer read it (S3's 412)."""


@contextlib.contextmanager
def _failing(action: str, permission: str | None = None) -> Iterator[None]:
    """Any error inside as a :class:`StorageError` saying what failed (``cannot read <uri>``); an
    S3 refusal (403) says so plainly, naming the IAM ``permission`` the request needs."""
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        if permission is not None and denied(exc):
            raise StorageError(f"{action}: access denied (403): the credentials lack {permission}, or a policy "
                               f"denies it (docs/deploy.md, S3 and IAM): {_one_line(exc)}") from exc
        raise StorageError(f"{action}: {_one_line(exc)}") from exc


def _one_line(exc: Exception) -> str:
    """An error's message on one line (a pydantic error: each field's reason)."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) + ': ' if e['loc'] else ''}{e['msg']}" for e in exc.errors())
    return " ".join(str(exc).split())


def denied(exc: BaseException) -> bool:
    """Whether ``exc`` is S3's refusal (403 AccessDenied), from boto3 or Polars' reader."""
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in ("AccessDenied", "403", "Forbidden", "AllAccessDisabled") or status == 403:
        return True
    text = str(exc)
    return "AccessDenied" in text or ("403" in text and "Forbidden" in text)


@dataclass(frozen=True)
class ObjectInfo:
    """One object below a prefix."""

    key: str
    size: int
    modified: float  #: when it was last modified (epoch seconds)
    version: str = ""  #: changes with every write of the object (S3's ETag; a file's inode, size and time)


class Store(Protocol):
    """Object storage under one root URI; keys are relative to the root. A store subclasses it for
    :meth:`delete_prefix`."""

    root: str

    def uri(self, key: str) -> str: ...
    def list(self, prefix: str, start_after: str = "", end_before: str = "") -> list[ObjectInfo]:
        """Objects whose keys start with ``prefix``, sorted by key; only those after ``start_after``
        and before ``end_before`` when given (one listing of a range of a folder)."""
        ...

    def read_bytes(self, key: str) -> bytes: ...
    def write_bytes(self, key: str, data: bytes) -> None: ...
    def write_bytes_if(self, key: str, data: bytes, version: str | None) -> None:
        """Write ``key`` only if it is as the writer saw it: absent (``version`` None), or at
        ``version`` (its :attr:`ObjectInfo.version` as listed); else :class:`StaleWrite`."""
        ...

    def upload_file(self, key: str, path: Path) -> None: ...
    def download_file(self, key: str, path: Path) -> None: ...
    def exists(self, key: str) -> bool: ...
    def copy(self, source: str, target: str) -> None: ...
    def delete_keys(self, keys: Sequence[str]) -> None: ...

    def delete_prefix(self, prefix: str) -> None:
        """Delete every object under ``prefix``."""
        self.delete_keys([o.key for o in self.list(prefix)])


class LocalStore(Store):
    """A directory as a store. Writes go to a temporary file renamed into place (atomic)."""

    def __init__(self, root: str | Path) -> None:
        self.path = Path(str(root).removeprefix("file://")).resolve()
        self.root = str(self.path)

    def uri(self, key: str) -> str:
        return str(self.path / key)

    def list(self, prefix: str, start_after: str = "", end_before: str = "") -> list[ObjectInfo]:
        base = self.path / prefix
        folder = base if prefix.endswith("/") or base.is_dir() else base.parent
        found = []
        for item in sorted(folder.rglob("*")):  # none in a folder that does not exist
            key = item.relative_to(self.path).as_posix()
            if not (key.startswith(prefix) and key > start_after and (not end_before or key < end_before)):
                continue
            if item.is_file() and not item.name.startswith(".tmp-"):
                with contextlib.suppress(FileNotFoundError):  # removed since the listing: not listed
                    stat = item.stat()
                    found.append(ObjectInfo(key, stat.st_size, stat.st_mtime, _file_version(stat)))
        return found

    def read_bytes(self, key: str) -> bytes:
        with _failing(f"cannot read {self.uri(key)}"):
            return (self.path / key).read_bytes()

    def write_bytes(self, key: str, data: bytes) -> None:
        self._land(key, lambda temporary: Path(temporary).write_bytes(data))

    def write_bytes_if(self, key: str, data: bytes, version: str | None) -> None:
        """Compare and swap, under an exclusive lock (``flock``) on a lock file beside the target,
        which every conditional writer of the key takes: the version is compared, and the file
        renamed into place, with no other conditional write in between."""
        target = self.path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / f".tmp-{target.name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            try:
                current: str | None = _file_version(target.stat())
            except FileNotFoundError:
                current = None
            if current != version:
                raise StaleWrite(f"cannot write {self.uri(key)}: it changed since it was read "
                                 f"(expected {'no object' if version is None else version}, found "
                                 f"{'none' if current is None else current})")
            self.write_bytes(key, data)

    def upload_file(self, key: str, path: Path) -> None:
        self._land(key, lambda temporary: shutil.copyfile(path, temporary))

    def _land(self, key: str, write: Callable[[str], object]) -> None:
        """Write a temporary file next to the target with ``write``, then rename it into place."""
        target = self.path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".tmp-", delete=False) as handle:
            pass
        try:
            write(handle.name)
            os.chmod(handle.name, 0o644)  # tempfile creates 0600; landed files are for readers too
            os.replace(handle.name, target)
        except BaseException:
            Path(handle.name).unlink(missing_ok=True)  # a failed write leaves nothing behind
            raise

    def download_file(self, key: str, path: Path) -> None:
        shutil.copyfile(self.path / key, path)

    def exists(self, key: str) -> bool:
        return (self.path / key).is_file()

    def copy(self, source: str, target: str) -> None:
        """Copy an object within the store; the target appears whole (atomic)."""
        self.upload_file(target, self.path / source)

    def delete_keys(self, keys: Sequence[str]) -> None:
        """Delete these objects; one already gone is no error."""
        for key in keys:
            (self.path / key).unlink(missing_ok=True)

    def prune(self, prefix: str) -> None:
        """Remove the empty folders under ``prefix`` (a directory store's folders are not objects)."""
        for folder, _, _ in os.walk(self.path / prefix, topdown=False):  # none in a folder that does not exist
            with contextlib.suppress(OSError):  # not empty (written meanwhile): kept
                os.rmdir(folder)


class S3Store(Store):
    """``s3://bucket/prefix`` as a store, through the :class:`S3Access` passed in."""

    def __init__(self, root: str, s3: S3Access) -> None:
        match = re.fullmatch(r"s3://([^/]+)/?(.*)", root)
        if not match:
            raise StorageError(f"not an s3:// URI: {root}")
        self.bucket = match.group(1)
        self.prefix = match.group(2).strip("/")
        self.root = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.s3 = s3
        self.client = s3.client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    @property
    def connections(self) -> int:
        """The connections its client keeps open (``max_pool_connections``): as many reads can be
        in flight on their own connection (:data:`S3_MAX_POOL_CONNECTIONS` unless configured)."""
        return int(self.client.meta.config.max_pool_connections)

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def list(self, prefix: str, start_after: str = "", end_before: str = "") -> list[ObjectInfo]:
        found = []
        strip = len(self.prefix) + 1 if self.prefix else 0
        paginator = self.client.get_paginator("list_objects_v2")
        # S3 lists in key order: the listing starts after start_after, and ends at end_before
        after = {"StartAfter": self._key(start_after)} if start_after else {}
        with _failing(f"cannot list {self.uri(prefix)}", self._list_permission(prefix)):
            pages = paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix), **after)
            for item in itertools.chain.from_iterable(page.get("Contents", []) for page in pages):
                key = item["Key"][strip:]
                if end_before and key >= end_before:
                    break
                found.append(ObjectInfo(key, int(item["Size"]), item["LastModified"].timestamp(), item.get("ETag", "")))
        return sorted(found, key=lambda o: o.key)

    def _list_permission(self, prefix: str) -> str:
        return f"s3:ListBucket on arn:aws:s3:::{self.bucket} with s3:prefix {self._key(prefix)!r}"

    def object_permission(self, action: str, key: str) -> str:
        """The IAM permission a request of ``action`` on ``key`` needs, as an error names it."""
        # S3 answers 403, not 404, for a missing object to credentials that may not list the bucket
        missing = " (or the object does not exist)" if action == "s3:GetObject" else ""
        return f"{action} on arn:aws:s3:::{self.bucket}/{self._key(key)}{missing}"

    def read_bytes(self, key: str) -> bytes:
        with _failing(f"cannot read {self.uri(key)}", self.object_permission("s3:GetObject", key)):
            data: bytes = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        return data

    def write_bytes(self, key: str, data: bytes) -> None:
        with _failing(f"cannot write {self.uri(key)}", self.object_permission("s3:PutObject", key)):
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **_content_type(key))

    def write_bytes_if(self, key: str, data: bytes, version: str | None) -> None:
        """A conditional PUT: ``If-None-Match: *`` (only if absent) or ``If-Match: <version>``;
        S3's 412 PreconditionFailed (or 409 for a concurrent conditional write, or 404 for an
        If-Match on an object deleted meanwhile) is :class:`StaleWrite`."""
        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}
        with _failing(f"cannot write {self.uri(key)}", self.object_permission("s3:PutObject", key)):
            try:
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **_content_type(key),
                                       **condition)
            except Exception as exc:
                code = str((getattr(exc, "response", None) or {}).get("Error", {}).get("Code", ""))
                if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"):
                    raise StaleWrite(f"cannot write {self.uri(key)}: it changed since it was read ({code})") from exc
                raise

    def upload_file(self, key: str, path: Path) -> None:
        with _failing(f"cannot write {self.uri(key)}", self.object_permission("s3:PutObject", key)):  # a multipart upload is visible only once complete: atomic
            self.client.upload_file(str(path), self.bucket, self._key(key), ExtraArgs=_content_type(key) or None)

    def download_file(self, key: str, path: Path) -> None:
        with _failing(f"cannot read {self.uri(key)}", self.object_permission("s3:GetObject", key)):
            self.client.download_file(self.bucket, self._key(key), str(path))

    def exists(self, key: str) -> bool:
        """Whether the object exists: a list of at most one key from the key's own name (the key
        itself sorts before every longer key it starts), which needs ``s3:ListBucket`` under the
        key's prefix only. (A HEAD of a missing object answers 404 only to credentials that may
        list the whole bucket: to others, 403.) Any error (403, throttling after retries, a reset
        connection) raises StorageError: it says nothing about the object."""
        with _failing(f"cannot check {self.uri(key)}", self._list_permission(key)):
            try:
                response = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._key(key), MaxKeys=1)
            except Exception as exc:
                if (getattr(exc, "response", None) or {}).get("Error", {}).get("Code") == "NoSuchBucket":
                    return False  # no bucket: nothing there
                raise
        return any(item["Key"] == self._key(key) for item in response.get("Contents", []))

    def copy(self, source: str, target: str) -> None:
        """Copy an object within the bucket, server-side (multipart above 8 MiB), with its content
        type; the target appears whole when the copy completes."""
        with _failing(f"cannot copy {self.uri(source)} to {self.uri(target)}",
                      f"{self.object_permission('s3:GetObject', source)} and s3:PutObject on the target"):
            self.client.copy({"Bucket": self.bucket, "Key": self._key(source)}, self.bucket, self._key(target))

    def delete_keys(self, keys: Sequence[str]) -> None:
        """Delete these objects, 1,000 a request (S3's limit); one already gone is no error."""
        for start in range(0, len(keys), 1000):
            batch = [{"Key": self._key(key)} for key in keys[start : start + 1000]]
            where = self.uri(keys[start])
            with _failing(f"cannot delete {where} and {len(batch) - 1} more", self.object_permission("s3:DeleteObject", keys[start])):
                response = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            if response.get("Errors"):  # a quiet delete answers 200 and lists the keys it could not delete
                raise StorageError(f"cannot delete {where} and {len(batch) - 1} more: {response['Errors'][:3]}")

    def storage_options(self) -> dict[str, Any]:
        """Polars' ``storage_options`` for this bucket, from the boto3 client: its endpoint (unless
        it is AWS's own), region and retry budget. The credentials are not among them: Polars gets
        them from :func:`~evaluation.storage.credential_provider`, as they change."""
        meta = self.client.meta
        options: dict[str, Any] = {"aws_region": meta.region_name or DEFAULT_REGION}
        endpoint = meta.endpoint_url or ""
        if endpoint and not re.search(r"\.amazonaws\.com(\.cn)?/?$", endpoint):
            options["aws_endpoint_url"] = endpoint
            options["aws_virtual_hosted_style_request"] = "false"
            if endpoint.startswith("http://"):
                options["aws_allow_http"] = "true"
        attempts = (meta.config.retries or {}).get("total_max_attempts") or S3_MAX_ATTEMPTS
        options["max_retries"] = max(int(attempts) - 1, 0)
        return options


def _file_version(stat: os.stat_result) -> str:
    """A file's version: a rename into place gives it a new inode, a write a new size or time."""
    return f"{stat.st_ino}-{stat.st_size}-{stat.st_mtime_ns}"


def _content_type(key: str) -> dict[str, str]:
    suffix = Path(key).suffix
    return {"ContentType": _CONTENT_TYPES[suffix]} if suffix in _CONTENT_TYPES else {}


#: Attempts per S3 request, the first included (botocore's retry modes count it).
S3_MAX_ATTEMPTS = 8


S3_CONNECT_TIMEOUT_S = 10.0


S3_READ_TIMEOUT_S = 60.0


#: Connections the S3 client keeps open (botocore's default is 10). The ingest stage reads a day's
#: small objects this many at a time (:attr:`S3Store.connections`): a small GET waits tens of
#: milliseconds or more on S3, so reads in flight, not bandwidth, set the rate (docs/performance.md).
S3_MAX_POOL_CONNECTIONS = 64


DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class S3Access:
    """How the product reaches S3: a boto3 session and the S3 client made from it.

    The session holds the credentials, whatever their source (keys, a session token, a profile, an
    assumed role, an instance or pod role: boto3's chain, or an Airflow connection through the
    Amazon provider's hook); botocore refreshes refreshable ones before they expire, for the client
    and for Polars' reads alike (:class:`SessionCredentials`). The client carries the endpoint,
    region, retries and timeouts. Build one with :func:`s3_access`."""

    session: boto3.Session
    client: Any  #: a boto3 S3 client made from ``session``


def s3_config(overrides: Config | None = None, *, max_attempts: int = S3_MAX_ATTEMPTS) -> Config:
    """The S3 client's botocore configuration: retries, timeouts and its connection pool (below),
    with ``overrides`` (such as an Airflow connection's ``botocore_config``) taking precedence where they set a value.

    Botocore retries transient errors itself: throttling (503 SlowDown, 429), 500/502/503/504,
    connection errors and timeouts, up to ``max_attempts`` attempts with exponential backoff and
    jitter (an override's ``adaptive`` mode also slows down while throttled). Everything else fails at once."""
    from botocore.config import Config  # boto3 is imported on the S3 path only

    defaults = Config(retries={"mode": "standard", "total_max_attempts": max_attempts},
                      connect_timeout=S3_CONNECT_TIMEOUT_S, read_timeout=S3_READ_TIMEOUT_S,
                      max_pool_connections=S3_MAX_POOL_CONNECTIONS)
    return defaults.merge(overrides) if overrides is not None else defaults


def s3_access(
    session: boto3.Session | None = None,
    *,
    profile: str | None = None,
    endpoint_url: str | None = None,
    config: Config | None = None,
    verify: bool | str | None = None,
) -> S3Access:
    """S3 through ``session``, else a session of boto3's own chain (the environment's keys, the
    ``profile`` or ``AWS_PROFILE``, a web identity, the instance or pod role), with the client's
    ``endpoint_url`` (None: ``AWS_ENDPOINT_URL``, else AWS's own) and the :func:`s3_config` made
    from ``config``."""
    import boto3  # boto3 is imported on the S3 path only

    share_models()  # before a session is made: boto3 takes its loader then
    if session is None:
        session = boto3.Session(profile_name=profile or None)
    client = session.client("s3", endpoint_url=endpoint_url or None, region_name=session.region_name or DEFAULT_REGION,
                            config=config if config is not None else s3_config(), verify=verify)
    return S3Access(session, client)


class SessionCredentials:
    """Polars' ``credential_provider`` over a boto3 session: its current credentials.

    The credentials are reported as expiring at once, so Polars asks again before its next request
    (a lock and a clock read, unless botocore refreshes them); botocore hands out the session's
    current set and refreshes it before it expires. A scan longer than the credentials' life thus
    reads on with fresh ones. Only public botocore calls are used (``get_credentials``,
    ``get_frozen_credentials``)."""

    def __init__(self, session: boto3.Session, clock: Callable[[], float] = time.time) -> None:
        self.session = session
        self.clock = clock

    def __call__(self) -> tuple[dict[str, str], int]:
        credentials = self.session.get_credentials()
        if credentials is None:
            raise StorageError("no AWS credentials: set them in the environment (AWS_ACCESS_KEY_ID...), a profile "
                               "(AWS_PROFILE, --aws-profile), a role, or the Airflow connection aws_default")
        frozen = credentials.get_frozen_credentials()
        values = {"aws_access_key_id": frozen.access_key, "aws_secret_access_key": frozen.secret_key}
        if frozen.token:
            values["aws_session_token"] = frozen.token
        return values, int(self.clock())


def open_store(uri: str, s3: S3Access | None = None) -> Store:
    """The store for ``uri``: S3 for ``s3://`` (boto3's own chain unless ``s3`` is given)."""
    if uri.startswith("s3://"):
        return S3Store(uri, s3 if s3 is not None else s3_access())
    if "://" in uri and not uri.startswith("file://"):
        raise StorageError(f"unsupported URI scheme: {uri} (use s3:// or a local directory)")
    return LocalStore(uri)


def open_stores(*uris: str | None, s3: S3Access | None = None,
                make_access: Callable[[], S3Access] = s3_access) -> list[Any]:
    """A store for each URI (None for an empty one), all sharing one :class:`S3Access`: ``s3``,
    else one from ``make_access``, made only when a URI is on S3."""
    if s3 is None and any((uri or "").startswith("s3://") for uri in uris):
        s3 = make_access()
    return [open_store(uri, s3) if uri else None for uri in uris]
