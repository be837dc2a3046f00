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

A day is landed whole (docs/tables.md, "Layout", says what readers see and when): each object
is written whole under a name of its own (a single PUT, or a multipart upload that S3 makes
visible only when it completes; locally a file renamed into place), then the day's commit record
(:class:`DayCommit`) in one conditional PUT (:func:`commit_day_if`: only over the record the
landing read), then the objects that record supersedes are deleted. Every reader of the project
finds a day's objects through the commit records only (:func:`read_landed`, the one way); a
reader that opens an object a newer landing deleted fails with a :class:`StorageError` naming it.

S3: every S3 store reaches S3 through an :class:`S3Access`, a boto3 session and the client made
from it (in Airflow, from the ``aws_default`` connection).

Reading: :func:`scan_table` gives a landed table as a Polars ``LazyFrame`` over its days' committed
objects where they live (S3 through Polars' own client, with :class:`SessionCredentials`): nothing
is downloaded first.

Errors: every storage failure raises :class:`StorageError` naming the URI and the cause, and a
refusal (403) the IAM permission it needs; "not found" is an answer only where it is one
(``exists`` asks with a list from the key, and is False when the key is not listed). Transient S3 errors (throttling such as 503 SlowDown, 5xx, reset connections, timeouts)
are retried by botocore's own retry mode (:func:`s3_access`) and by Polars' client, never by a
loop of ours.
"""

from __future__ import annotations

from evaluation.contract.errors import StorageError as StorageError
from evaluation.storage._botocore import parse_s3_models, share_models
from evaluation.storage.keys import (
    DAY_OBJECTS,
    DAY_TABLES,
    PARQUET_COMPRESSION,
    RAW_SUFFIXES,
    TABLES,
    calibration_key,
    chunk_key,
    claim_key,
    commit_key,
    comparison_key,
    day_partition,
    failed_key,
    failed_prefix,
    human_labels_key,
    landing_key,
    ledger_prefix,
    legacy_key,
    raw_prefix,
    report_key,
    review_queue_key,
    review_state_key,
    run_key,
    safe_id,
    work_key,
    work_prefix,
)
from evaluation.storage.stores import (
    S3_CONNECT_TIMEOUT_S,
    S3_MAX_ATTEMPTS,
    LocalStore,
    ObjectInfo,
    S3Access,
    S3Store,
    SessionCredentials,
    StaleWrite,
    Store,
    open_store,
    open_stores,
    s3_access,
    s3_config,
)
from evaluation.storage.tables import (
    DayCommit,
    Landed,
    commit_day,
    commit_day_if,
    commit_version,
    credential_provider,
    landed_key,
    list_day_objects,
    read_commit,
    read_consistently,
    read_day,
    read_json,
    read_landed,
    read_parquet,
    scan_day,
    scan_parquet,
    scan_table,
    sink_parquet,
    storage_options,
    uncommitted,
    write_json,
    write_parquet,
)

__all__ = ["DAY_OBJECTS", "DAY_TABLES", "DayCommit", "Landed", "LocalStore", "ObjectInfo", "PARQUET_COMPRESSION", "RAW_SUFFIXES", "S3Access", "S3Store", "S3_CONNECT_TIMEOUT_S", "S3_MAX_ATTEMPTS", "SessionCredentials", "StaleWrite", "StorageError", "Store", "TABLES", "calibration_key", "chunk_key", "claim_key", "commit_day", "commit_day_if", "commit_key", "commit_version", "comparison_key", "credential_provider", "day_partition", "failed_key", "failed_prefix", "human_labels_key", "landed_key", "landing_key", "ledger_prefix", "legacy_key", "list_day_objects", "open_store", "open_stores", "parse_s3_models", "raw_prefix", "read_commit", "read_consistently", "read_day", "read_json", "read_landed", "read_parquet", "report_key", "review_queue_key", "review_state_key", "run_key", "s3_access", "s3_config", "safe_id", "scan_day", "scan_parquet", "scan_table", "share_models", "sink_parquet", "storage_options", "uncommitted", "work_key", "work_prefix", "write_json", "write_parquet"]
