"""Polars reads S3 with the boto3 client's settings: a scan of a table on the S3 API (moto on
loopback) asks the session for credentials before each request, so a long scan gets fresh ones."""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3
import polars as pl

from evaluation import storage


class _CountingSession(boto3.Session):
    """A boto3 session that counts who asks it for credentials (its clients do not: they hold
    botocore's credentials themselves)."""

    asked = 0

    def get_credentials(self) -> Any:
        self.asked += 1
        return super().get_credentials()


def test_a_polars_scan_asks_for_credentials_before_each_request_not_once(local_s3: Any) -> None:
    session = _CountingSession(aws_access_key_id="embedded-access-key", aws_secret_access_key="embedded-secret-key",
                               region_name="us-east-1")
    store = storage.open_store("s3://llm-evaluation/credentials", local_s3.access(session))
    days = [dt.date(2026, 11, day) for day in range(1, 7)]
    for day in days:
        storage.write_parquet(store, storage.landing_key("evaluations", day, "r1"), pl.DataFrame({"score": [float(day.day)]}))
        storage.commit_day(store, day, "r1", {"evaluations": storage.landing_key("evaluations", day, "r1")})
    assert session.asked == 0
    table = storage.scan_table(store, "evaluations")
    assert table is not None and table.select(pl.col("score").sum()).collect().item() == sum(d.day for d in days)
    assert session.asked >= len(days)  # at least once per object read: a long scan gets fresh credentials
