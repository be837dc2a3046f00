"""Storage: every key and URI of the product, and one API over S3 (boto3) and local directories.

Layout under an output root (``s3://bucket/prefix`` or a directory), CONTRACT §3::

    evaluations/dt=YYYY-MM-DD/run-<run id>.parquet   one object per table, day and landing run
    judge_calls/dt=YYYY-MM-DD/run-<run id>.parquet
    rejects/dt=YYYY-MM-DD/run-<run id>.parquet
    daily_summary/dt=YYYY-MM-DD/run-<run id>.parquet
    validation/dt=YYYY-MM-DD/run-<run id>.json     the Great Expectations result
    _landed/dt=YYYY-MM-DD.json                     the day's commit record: which run's objects are the day
    runs/dt=YYYY-MM-DD/run-<run id>.parquet     one object per run: the audit log of every run
    comparisons/comparison_id=<id>/<table>.parquet
    calibrations/calibration_id=<id>/<table>.parquet, report.html
    reports/dt=YYYY-MM-DD/index.html, summary.json
    _work/dt=YYYY-MM-DD/run=<run id>/...        a run's staged chunks (readers skip `_` paths)
    _ledger/dt=YYYY-MM-DD/*.parquet             replies of earlier judge calls, for reuse
    _claims/dt=YYYY-MM-DD.json                  which run owns the day (stale runs may not land)
    review_queue/dt=YYYY-MM-DD/queue-<id>.parquet   records of the day queued for people
    human_labels/dt=YYYY-MM-DD/labels-<hash>.parquet  people's labels, by the day labelled
    _review/<source>.json                       how far a Label Studio project's labels were pulled

A day is landed whole: a landing writes each of its objects under a name of its own (so nothing a
reader sees is overwritten), then the day's commit record (:class:`DayCommit`) in one conditional
PUT (:func:`commit_day_if`: only over the record the landing read), then deletes the objects that
record supersedes. Every reader of the project finds a day's objects
through the commit records only (:func:`read_landed`, the one way), so it sees the day of one run,
all its tables together, the previous run's until the commit and the new one's after; a landing
that dies before its commit changes nothing a reader sees. (A reader that read the commit just
before a newer one, and opens the day's objects after that landing deleted them, fails with a
:class:`StorageError` naming the object: never a mix; reading again reads the new day.) Each
object is itself written whole (a single PUT, or a multipart upload that S3 makes visible only
when it completes; locally a file renamed into place). A day landed before commit records
(``<table>/dt=D/part-0.parquet``, ``validation/dt=D/result.json``, no record) reads as those
objects. Engines that glob the folders (DuckDB, Athena, Polars) see every object there: both
runs' rows between a landing's uploads and its deletions (each row carries its ``run_id``;
docs/tables.md gives the query that keeps the landed run's). ``dt`` lives in the path only (a Date
hive partition); the files do not repeat it, as Hive, Athena and Trino expect.

S3: every S3 store reaches S3 through an :class:`S3Access`, a boto3 session and the client made
from it. The session's credentials are whatever the session resolved (keys, a session token, a
profile, an assumed role, an instance or pod role), refreshed by botocore before they expire; in
Airflow the session comes from the ``aws_default`` connection through the Amazon provider's hook.

Reading: :func:`scan_table` gives a landed table as a Polars ``LazyFrame`` over its days' committed
objects where they live (a directory, or S3 through Polars' own client with the boto3 client's
endpoint and region, and the session's credentials asked for before each request, so a long scan outlives
short-lived credentials): nothing is downloaded first, only the columns a query selects are read,
and a filter on ``dt`` skips the other partitions' objects unopened.

Errors: every storage failure raises :class:`StorageError` naming the URI and the cause, and a
refusal (403) the IAM permission it needs; "not found" is an answer only where it is one
(``exists`` asks with a list from the key, and is False when the key is not listed). Transient S3 errors (throttling such as 503 SlowDown, 5xx, reset connections, timeouts)
are retried by botocore's own retry mode (:func:`s3_access`) and by Polars' client, never by a
loop of ours.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import io
import itertools
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluation.errors import StorageError as StorageError  # storage's own error, where its callers look for it

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

logger = logging.getLogger(__name__)

TABLES = ("evaluations", "judge_calls", "rejects", "daily_summary", "runs")
#: The tables a landing replaces for its day, all at once (``runs`` keeps one object per run).
DAY_TABLES = ("evaluations", "judge_calls", "rejects", "daily_summary")
#: What a day's commit names: its tables and its validation result.
DAY_OBJECTS = (*DAY_TABLES, "validation")
RAW_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
PARQUET_COMPRESSION: Literal["zstd"] = "zstd"
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


# --------------------------------------------------------------------------------------------
# Keys (relative to a root URI)


def day_partition(day: dt.date) -> str:
    """``dt=YYYY-MM-DD``."""
    return f"dt={day.isoformat()}"


def safe_id(value: str) -> str:
    """A run or comparison id made safe for a path segment (Airflow run ids hold ':' and '+')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("_") or "run"


def raw_prefix(day: dt.date, layout: str = "hive") -> str:
    """Where the day's raw logs live under the input root, in the input's ``layout``
    (:data:`evaluation.adapters.INPUT_LAYOUTS`): ``dt=YYYY-MM-DD/``, ``YYYY-MM-DD/`` (hour
    folders below it, if any) or ``year=YYYY/month=MM/day=DD/`` (hour and minute folders below)."""
    if layout == "date":
        return f"{day.isoformat()}/"
    if layout == "ymd":
        return f"year={day.year:04d}/month={day.month:02d}/day={day.day:02d}/"
    if layout != "hive":
        raise ValueError(f"unknown input layout {layout!r}")
    return f"{day_partition(day)}/"


def landing_key(name: str, day: dt.date, run_id: str, *, again: bool = False) -> str:
    """Where run ``run_id`` lands ``name`` (a table of :data:`DAY_TABLES`, or ``validation``) for
    ``day``: an object of the run's own, so a landing never overwrites what readers see; the day's
    commit record (:func:`commit_day`) makes it part of the day. ``again`` gives the other name of
    the same run (``run-<id>~1``), for a run that lands its day again while its first objects are
    the landed day."""
    suffix = ".json" if name == "validation" else ".parquet"
    return f"{name}/{day_partition(day)}/run-{safe_id(run_id)}{'~1' if again else ''}{suffix}"


def legacy_key(name: str, day: dt.date) -> str:
    """The one object of ``name`` of a day landed before commit records."""
    return f"{name}/{day_partition(day)}/" + ("result.json" if name == "validation" else "part-0.parquet")


def commit_key(day: dt.date) -> str:
    """The day's commit record: which run's objects are the day (:class:`DayCommit`)."""
    return f"_landed/{day_partition(day)}.json"


def table_prefix(table: str) -> str:
    return f"{table}/"


def run_key(day: dt.date, run_id: str) -> str:
    """The object holding the ``runs`` row of one run."""
    return f"runs/{day_partition(day)}/run-{safe_id(run_id)}.parquet"


def report_key(day: dt.date, name: str = "index.html") -> str:
    """A file of the day's report."""
    return f"reports/{day_partition(day)}/{name}"


def comparison_key(comparison_id: str, name: str) -> str:
    """A file of one model comparison."""
    return f"comparisons/comparison_id={safe_id(comparison_id)}/{name}"


def calibration_key(calibration_id: str, name: str) -> str:
    """A file of one judge calibration."""
    return f"calibrations/calibration_id={safe_id(calibration_id)}/{name}"


def work_prefix(day: dt.date, run_id: str) -> str:
    """Staging area of one run of one day."""
    return f"_work/{day_partition(day)}/run={safe_id(run_id)}/"


def work_key(day: dt.date, run_id: str, name: str) -> str:
    return work_prefix(day, run_id) + name


def chunk_key(day: dt.date, run_id: str, kind: str, index: int) -> str:
    """A staged chunk: ``kind`` is records, judged or calls."""
    return work_key(day, run_id, f"{kind}/chunk-{index:05d}.parquet")


def failed_prefix(day: dt.date, run_id: str) -> str:
    """Evidence of a failed run (its rejects, validation and scored rows): outside every table's
    folder, under a name that Hive-style readers (Athena, Trino, Spark) skip, so a failed run never
    shows up in analysts' queries nor replaces the day's landed tables."""
    return f"_failed/{day_partition(day)}/run={safe_id(run_id)}/"


def failed_key(day: dt.date, run_id: str, name: str) -> str:
    return failed_prefix(day, run_id) + name


def ledger_prefix(day: dt.date) -> str:
    """The ledger of judge calls made for the day."""
    return f"_ledger/{day_partition(day)}/"


def review_queue_key(day: dt.date, queue_id: str) -> str:
    """A review queue of ``day``'s records (:mod:`evaluation.review.queue`): one object per queue."""
    return f"review_queue/{day_partition(day)}/queue-{safe_id(queue_id)}.parquet"


def human_labels_key(day: dt.date, batch: str) -> str:
    """A batch of people's labels landed for ``day`` (the day they were labelled), named by the
    hash of its label ids (:mod:`evaluation.review.labels`)."""
    return f"human_labels/{day_partition(day)}/labels-{safe_id(batch)}.parquet"


def review_state_key(source: str) -> str:
    """Where a label source (a Label Studio project) keeps how far its labels were pulled."""
    return f"_review/{safe_id(source)}.json"


def claim_key(day: dt.date) -> str:
    """Names the run that owns the day's landing."""
    return f"_claims/{day_partition(day)}.json"


# --------------------------------------------------------------------------------------------
# Stores


@dataclass(frozen=True)
class ObjectInfo:
    """One object below a prefix."""

    key: str
    size: int
    modified: float  #: when it was last modified (epoch seconds)
    version: str = ""  #: changes with every write of the object (S3's ETag; a file's inode, size and time)


class Store(Protocol):
    """Object storage under one root URI; keys are relative to the root."""

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
    def delete_prefix(self, prefix: str) -> int: ...
    def delete_keys(self, keys: Sequence[str]) -> None: ...


class LocalStore:
    """A directory as a store. Writes go to a temporary file renamed into place (atomic)."""

    def __init__(self, root: str | Path) -> None:
        self.path = Path(str(root).removeprefix("file://")).resolve()
        self.root = str(self.path)

    def uri(self, key: str) -> str:
        return str(self.path / key)

    def list(self, prefix: str, start_after: str = "", end_before: str = "") -> list[ObjectInfo]:
        base = self.path / prefix
        folder = base if prefix.endswith("/") or base.is_dir() else base.parent
        if not folder.exists():
            return []
        found = []
        for item in sorted(folder.rglob("*")):
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
            data = (self.path / key).read_bytes()
        return data

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

    def delete_prefix(self, prefix: str) -> int:
        objects = self.list(prefix)
        self.delete_keys([o.key for o in objects])
        return len(objects)

    def delete_keys(self, keys: Sequence[str]) -> None:
        """Delete these objects; one already gone is no error."""
        for key in keys:
            (self.path / key).unlink(missing_ok=True)

    def prune(self, prefix: str) -> None:
        """Remove the empty folders under ``prefix`` (a directory store's folders are not objects)."""
        base = self.path / prefix
        if base.is_dir():
            for folder in sorted([p for p in base.rglob("*") if p.is_dir()] + [base], key=lambda p: len(p.parts),
                                 reverse=True):
                with contextlib.suppress(OSError):  # not empty (written meanwhile): kept
                    folder.rmdir()


class S3Store:
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

    def delete_prefix(self, prefix: str) -> int:
        objects = self.list(prefix)
        self.delete_keys([o.key for o in objects])
        return len(objects)

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
        them from :meth:`credential_provider`, as they change."""
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

    def credential_provider(self) -> SessionCredentials:
        """Polars' ``credential_provider``: the session's credentials, current at each request."""
        return SessionCredentials(self.s3.session)


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


def s3_config(overrides: Config | None = None, *, max_attempts: int = S3_MAX_ATTEMPTS,
              retry_mode: Literal["standard", "adaptive"] = "standard") -> Config:
    """The S3 client's botocore configuration: retries and timeouts (below), with ``overrides``
    (such as an Airflow connection's ``botocore_config``) taking precedence where they set a value.

    Botocore retries transient errors itself: throttling (503 SlowDown, 429), 500/502/503/504,
    connection errors and timeouts, up to ``max_attempts`` attempts with exponential backoff and
    jitter (``adaptive`` also slows down while throttled). Everything else fails at once."""
    from botocore.config import Config  # boto3 is imported on the S3 path only

    defaults = Config(retries={"mode": retry_mode, "total_max_attempts": max_attempts},
                      connect_timeout=S3_CONNECT_TIMEOUT_S, read_timeout=S3_READ_TIMEOUT_S)
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


# --------------------------------------------------------------------------------------------
# Tables


def write_parquet(store: Store, key: str, frame: pl.DataFrame) -> None:
    """Land one Parquet object (zstd) atomically."""
    with tempfile.TemporaryDirectory(prefix="evaluation-") as folder:
        path = Path(folder) / "part.parquet"
        frame.write_parquet(path, compression=PARQUET_COMPRESSION, statistics=True)
        store.upload_file(key, path)
    logger.info("landed %s (%d rows)", store.uri(key), frame.height)


def sink_parquet(store: Store, key: str, frame: pl.LazyFrame) -> int:
    """Stream a lazy table into one Parquet object (zstd), atomically; returns its row count."""
    with tempfile.TemporaryDirectory(prefix="evaluation-") as folder:
        path = Path(folder) / "part.parquet"
        frame.sink_parquet(path, compression=PARQUET_COMPRESSION)
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        store.upload_file(key, path)
    logger.info("landed %s (%d rows)", store.uri(key), rows)
    return int(rows)


def read_parquet(store: Store, key: str) -> pl.DataFrame:
    return pl.read_parquet(io.BytesIO(store.read_bytes(key)))


def write_json(store: Store, key: str, payload: Any) -> None:
    """Land a JSON document atomically."""
    store.write_bytes(key, json.dumps(payload, indent=2, default=str, ensure_ascii=False).encode())


def read_json(store: Store, key: str) -> Any:
    """The JSON object at ``key``; one that does not parse is a :class:`StorageError` naming its URI."""
    data = store.read_bytes(key)
    try:
        return json.loads(data)
    except ValueError as exc:
        raise StorageError(f"cannot read {store.uri(key)}: not valid JSON: {exc}") from exc


#: An object of a daily table: ``<table>/dt=YYYY-MM-DD/<name>.parquet``.
_DAILY_OBJECT = re.compile(r"[^/]+/dt=\d{4}-\d{2}-\d{2}/[^/]+\.parquet")


def storage_options(store: Store) -> dict[str, Any] | None:
    """Polars' ``storage_options`` for reading the store's objects in place (None for a directory)."""
    return store.storage_options() if isinstance(store, S3Store) else None


def credential_provider(store: Store) -> SessionCredentials | None:
    """Polars' ``credential_provider`` for the store's objects (None for a directory)."""
    return store.credential_provider() if isinstance(store, S3Store) else None


def scan_parquet(store: Store, keys: list[str], *, hive: bool = True) -> pl.LazyFrame:
    """Objects of one table as one lazy table, read where they live; with ``hive`` the ``dt=``
    folder is a ``dt`` Date column and a filter on it skips other partitions' objects unopened.

    Objects written by different versions may differ: the newest object's schema is the table's
    (the keys sort oldest first), a column the newest object holds only as nulls (Parquet's null
    type) is read as a string, columns it lacks are dropped and columns an older object lacks are
    null, and narrower integers and floats are widened."""
    if not keys:
        raise StorageError(f"no objects to scan under {store.root}")
    options, credentials = storage_options(store), credential_provider(store)
    uris = [store.uri(key) for key in keys]
    permission = store.object_permission("s3:GetObject", keys[-1]) if isinstance(store, S3Store) else None
    # Polars raises several error types for a missing or torn object
    with _failing(f"cannot read {uris[-1]}", permission):
        newest = pl.scan_parquet(uris[-1], hive_partitioning=False, storage_options=options,
                                 credential_provider=credentials).collect_schema()
    schema = {name: pl.String if dtype == pl.Null else dtype for name, dtype in newest.items()
              if not (hive and name == "dt")}
    frame = pl.scan_parquet(
        uris,
        schema=schema,
        hive_partitioning=hive,
        hive_schema={"dt": pl.Date} if hive else None,
        missing_columns="insert",
        extra_columns="ignore",
        cast_options=pl.ScanCastOptions(integer_cast="upcast", float_cast="upcast"),
        storage_options=options,
        credential_provider=credentials,
    )
    return frame.select("dt", pl.exclude("dt")) if hive else frame


def scan_table(store: Store, table: str, landed: Landed | None = None) -> pl.LazyFrame | None:
    """A landed daily table with its ``dt`` column (a Date), lazily, read in place; None when no
    object of it has landed. A table of :data:`DAY_TABLES` is read through its days' commits:
    ``landed`` (pass the same :class:`Landed` to every table a reader combines, so they are of one
    run per day), else read now; ``runs`` is every run's object. Filter on ``dt`` to read only those
    days' objects, and select the columns needed: nothing else is read."""
    if table in DAY_TABLES:
        keys = (landed if landed is not None else read_landed(store)).keys(table)
    else:
        keys = [info.key for info in store.list(table_prefix(table)) if _DAILY_OBJECT.fullmatch(info.key)]
    return scan_parquet(store, keys) if keys else None


def scan_day(store: Store, table: str, day: dt.date, landed: Landed | None = None) -> pl.LazyFrame | None:
    """One landed day of a table of :data:`DAY_TABLES` (with ``dt``), lazily; None when the day
    has not landed. ``landed`` as for :func:`scan_table`."""
    key = (landed if landed is not None else read_landed(store, [day])).key(table, day)
    return None if key is None else scan_parquet(store, [key])


def landed_key(store: Store, name: str, day: dt.date) -> str | None:
    """The landed object of ``name`` (a table of :data:`DAY_TABLES`, or ``validation``) for
    ``day``, as the day's commit names it; None when the day has not landed."""
    return read_landed(store, [day]).key(name, day)


def read_day(store: Store, table: str, day: dt.date) -> pl.DataFrame:
    """One landed table-day, as its object holds it (no ``dt`` column); StorageError when the day
    has not landed."""
    key = landed_key(store, table, day)
    if key is None:
        raise StorageError(f"no {table} landed for {day.isoformat()} under {store.root} "
                           f"(no commit record {store.uri(commit_key(day))})")
    return read_parquet(store, key)


# --------------------------------------------------------------------------------------------
# Landed days: commit records


class DayCommit(BaseModel):
    """A day's commit record (``_landed/dt=YYYY-MM-DD.json``): the run whose objects are the
    day's tables, and each object's key. A landing writes it last, in one PUT, once every object it
    names is written (:func:`commit_day`); readers find a day's objects through it only, so one PUT
    replaces every table of the day at once, and a landing that dies before it changes nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    day: dt.date = Field(description="The day (dt) landed.")
    run_id: str | None = Field(description="The run that landed the day; None for a day landed before commit "
                                           "records (read as its legacy objects).")
    landed_at: dt.datetime | None = Field(description="When the commit was written (UTC).")
    objects: dict[str, str] = Field(description="Each of DAY_OBJECTS -> its object's key under the output root.")


@dataclass(frozen=True)
class Landed:
    """The landed days under a root, as read at one moment (:func:`read_landed`): each day's commit.
    A reader that takes every table it combines from one ``Landed`` sees one run's day."""

    commits: dict[dt.date, DayCommit]

    def key(self, name: str, day: dt.date) -> str | None:
        """The day's object of ``name``; None when the day has not landed."""
        commit = self.commits.get(day)
        return None if commit is None else commit.objects.get(name)

    def keys(self, name: str) -> list[str]:
        """Every landed day's object of ``name``, oldest day first."""
        return [commit.objects[name] for _, commit in sorted(self.commits.items()) if name in commit.objects]


_COMMIT = re.compile(r"_landed/dt=(\d{4}-\d{2}-\d{2})\.json")
#: An object a landing names (``run-<id>``), or a legacy one, under a day folder of DAY_OBJECTS.
_DAY_OBJECT = re.compile(rf"(?P<name>{'|'.join(DAY_OBJECTS)})/dt=(?P<day>\d{{4}}-\d{{2}}-\d{{2}})/"
                         r"(?P<file>run-[A-Za-z0-9._-]+(?:~1)?\.(?:parquet|json)|part-0\.parquet|result\.json)")
#: Commit records read at once (small GETs; a year of days is a few hundred): fewer than the boto3
#: client's pool of connections (botocore's default, 10), so no reader waits for one.
COMMIT_READERS = 8


def read_commit(store: Store, key: str) -> DayCommit:
    """One commit record."""
    data = store.read_bytes(key)
    with _failing(f"cannot read the commit record {store.uri(key)}"):
        return DayCommit.model_validate_json(data)


def read_landed(store: Store, days: Iterable[dt.date] | None = None) -> Landed:
    """What has landed under ``store`` (of ``days``, else every day): the one way every reader finds
    a day's objects. A day is what its commit record names; a day without one that holds legacy
    objects (landed before commit records) is those; any other object is no part of a day."""
    wanted = None if days is None else set(days)
    found: dict[dt.date, str] = {}
    for info in store.list("_landed/"):
        match = _COMMIT.fullmatch(info.key)
        if match is not None and (wanted is None or dt.date.fromisoformat(match.group(1)) in wanted):
            found[dt.date.fromisoformat(match.group(1))] = info.key
    with ThreadPoolExecutor(max_workers=COMMIT_READERS) as pool:
        commits = dict(zip(found, pool.map(lambda key: read_commit(store, key), found.values()), strict=True))
    if wanted is None or wanted - commits.keys():  # only the folders of the days without a commit
        legacy: dict[dt.date, dict[str, str]] = {}
        for info in list_day_objects(store, None if wanted is None else wanted - commits.keys()):
            match = _DAY_OBJECT.fullmatch(info.key)
            assert match is not None  # list_day_objects lists only such objects
            name, day = match.group("name"), dt.date.fromisoformat(match.group("day"))
            if day not in commits and info.key == legacy_key(name, day):
                legacy.setdefault(day, {})[name] = info.key
        commits.update({day: DayCommit(day=day, run_id=None, landed_at=None, objects=objects)
                        for day, objects in legacy.items()})
    return Landed(dict(sorted(commits.items())))


_T = TypeVar("_T")
#: How many times :func:`read_consistently` reads again after a landing replaced a day under it.
CONSISTENT_READS = 3


def read_consistently(store: Store, days: Iterable[dt.date] | None, read: Callable[[Landed], _T]) -> _T:
    """``read`` of what has landed (of ``days``, else every day: :func:`read_landed`). A landing
    that replaces a day deletes the objects the day's old commit named, once its own commit is
    written: a reader that read the old commit just before can find them gone. When ``read`` fails
    and the commit records changed meanwhile, it reads again, with the new ones (at most
    :data:`CONSISTENT_READS` times); a failure with the records unchanged is raised at once."""
    wanted = None if days is None else list(days)
    landed = read_landed(store, wanted)
    for _ in range(CONSISTENT_READS - 1):
        try:
            return read(landed)
        except Exception:
            fresh = read_landed(store, wanted)
            if fresh == landed:
                raise
            changed = sorted(d.isoformat() for d in fresh.commits.keys() | landed.commits.keys()
                             if fresh.commits.get(d) != landed.commits.get(d))
            logger.info("%s: day(s) %s landed again during the read: reading again", store.root, ", ".join(changed))
            landed = fresh
    return read(landed)


def commit_day(store: Store, day: dt.date, run_id: str, objects: dict[str, str]) -> DayCommit:
    """Make ``objects`` (each of :data:`DAY_OBJECTS` -> its key, every one written already) the
    day's landed tables, all at once: one PUT of the day's commit record, whatever it held."""
    return _write_commit(store, day, run_id, objects, store.write_bytes)


def commit_version(store: Store, day: dt.date) -> str | None:
    """The version of the day's commit record as it is now (None: the day has none), for
    :func:`commit_day_if`. Read it before the record itself: a commit written in between then
    makes the conditional write fail, never succeed on a stale view."""
    key = commit_key(day)
    return next((info.version for info in store.list(key) if info.key == key), None)


def commit_day_if(store: Store, day: dt.date, run_id: str, objects: dict[str, str], version: str | None) -> DayCommit:
    """:func:`commit_day` as a conditional write: only over the record at ``version``
    (:func:`commit_version`), or where there is none (``version`` None); :class:`StaleWrite` when
    another landing committed the day since (S3: ``If-Match`` / ``If-None-Match``)."""
    return _write_commit(store, day, run_id, objects, lambda key, data: store.write_bytes_if(key, data, version))


def _write_commit(store: Store, day: dt.date, run_id: str, objects: dict[str, str],
                  write: Callable[[str, bytes], None]) -> DayCommit:
    commit = DayCommit(day=day, run_id=run_id, landed_at=dt.datetime.now(dt.UTC), objects=objects)
    write(commit_key(day), commit.model_dump_json(indent=2).encode())
    logger.info("committed %s: run %s", store.uri(commit_key(day)), run_id)
    return commit


def list_day_objects(store: Store, days: Iterable[dt.date] | None = None) -> list[ObjectInfo]:
    """The objects landings wrote under the day folders of :data:`DAY_OBJECTS` (of ``days``, else
    every day): ``run-<id>`` objects and legacy ones. Other files there are not listed.

    Each folder is listed once: of more than one day, from the first day's folder to the last's
    (a report's 30 days are 5 listings, not 150)."""
    chosen = None if days is None else set(days)
    wanted = sorted(chosen or ())
    found = []
    for name in DAY_OBJECTS:
        if chosen is None:
            listed = store.list(f"{name}/")
        elif len(wanted) == 1:
            listed = store.list(f"{name}/{day_partition(wanted[0])}/")
        elif wanted:
            # keys sort by day (dt=YYYY-MM-DD): the first day's folder name sorts before its objects,
            # the folder of the day after the last before its own objects
            listed = store.list(f"{name}/", start_after=f"{name}/{day_partition(wanted[0])}/",
                                end_before=f"{name}/{day_partition(wanted[-1] + dt.timedelta(days=1))}/")
        else:
            listed = []
        for info in listed:
            match = _DAY_OBJECT.fullmatch(info.key)
            if match is not None and (chosen is None or dt.date.fromisoformat(match.group("day")) in chosen):
                found.append(info)
    return found


def uncommitted(objects: Iterable[ObjectInfo], landed: Landed) -> list[ObjectInfo]:
    """Those of ``objects`` (from :func:`list_day_objects`) that no commit of ``landed`` names: a
    superseded run's, and those of a landing that died before or after its commit. List the objects
    first and read ``landed`` after: a commit written in between then names its objects."""
    found = []
    for info in objects:
        match = _DAY_OBJECT.fullmatch(info.key)
        if match is None:
            continue
        commit = landed.commits.get(dt.date.fromisoformat(match.group("day")))
        if commit is None or info.key not in commit.objects.values():
            found.append(info)
    return found
