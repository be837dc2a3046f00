"""A flaky S3: a day read from and landed to S3 through a proxy that answers 503 SlowDown or 500,
or resets the connection, on about one request in ten lands complete and identical to the same
day on a healthy S3 — botocore's and Polars' own retries ride the faults out. The proxy also shows
which objects a query reads: only the partitions it can match."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.storage import sql
from evaluation.testing import synthetic
from evaluation.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY, LocalS3
from tests.reliability.faulty_proxy import FaultyProxy, S3FaultPlan
from tests.reliability.helpers import DAY, config

RECORDS = 60
JUDGES = ("rag", "masis", "prompt")
#: Columns that time a call: they differ between any two runs.
TIMING = ("latency_ms", "judged_at", "latency_p50_ms", "latency_p95_ms")


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        for bucket in ("logs", "curated"):
            server.create_bucket(bucket)
        yield server


def _access(endpoint_url: str, **config: Any) -> storage.S3Access:
    session = boto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION)
    return storage.s3_access(session, endpoint_url=endpoint_url, config=storage.s3_config(**config))


def _run(tmp_path: Any, output_uri: str, s3_access: storage.S3Access) -> stages.DayResult:
    cfg = config(tmp_path, run_id="r1", input_uri="s3://logs/raw", output_uri=output_uri, judge_model="offline/lexical",
                 chunk_size=25, max_reject_ratio=0.5)
    return run_day(cfg, stages.Stores.open(cfg, s3_access))


def _table(store: storage.Store, name: str) -> pl.DataFrame:
    frame = storage.read_day(store, name, DAY)
    return frame.drop([c for c in TIMING if c in frame.columns])


def _report(store: storage.Store) -> dict[str, Any]:
    summary = json.loads(store.read_bytes(storage.report_key(DAY, "summary.json")))
    for group in summary["groups"]:
        for name in ("latency_p50_ms", "latency_p95_ms"):
            group["health"].pop(name)
    return {k: summary[k] for k in ("groups", "totals", "flags", "distributions", "worst_records", "rejects")}


def test_a_day_on_a_flaky_s3_lands_complete_and_identical(s3: LocalS3, tmp_path: Any) -> None:
    synthetic.write_day(storage.open_store("s3://logs/raw", s3.access()), DAY, RECORDS)
    clean_store = storage.open_store("s3://curated/clean", s3.access())
    clean = _run(tmp_path / "clean", clean_store.root, s3.access())

    plan = S3FaultPlan(slow_down=0.04, server_error=0.03, reset=0.03, seed=7, max_faults_per_request=2)
    # the plan draws by each request's body too (the tables hold the run's times), so which PUTs it
    # faults varies: the first PUT is also answered SlowDown once, so a write is always retried
    first_put = threading.Event()

    def slow_down_first_put(method: str, path: str) -> tuple[int, str, str] | None:
        if method != "PUT" or first_put.is_set():
            return None
        first_put.set()
        return 503, "SlowDown", "Please reduce your request rate."

    with FaultyProxy(s3.endpoint_url, plan, fail=slow_down_first_put) as proxy:
        through_proxy = _access(proxy.endpoint_url)
        flaky_store = storage.open_store("s3://curated/flaky", through_proxy)
        flaky = _run(tmp_path / "flaky", flaky_store.root, through_proxy)
        requests, faults = proxy.requests, proxy.fault_counts
        # Read back through the proxy too: the SQL command reads the tables in place with Polars.
        query = "SELECT judge, judge_status, count(*) AS n FROM evaluations WHERE dt = DATE '2026-11-20' " \
                "GROUP BY judge, judge_status ORDER BY judge, judge_status"
        assert_frame_equal(sql.run_sql(flaky_store, query), sql.run_sql(clean_store, query))
        flaky_report = _report(flaky_store)

    # Faults of every kind were injected, on about a tenth of the requests, and ridden out.
    assert all(faults[kind] > 0 for kind in ("slow_down", "server_error", "reset")), faults
    assert 0.04 < sum(faults.values()) / len(requests) < 0.2, (faults, len(requests))
    assert any(r.method == "PUT" and r.outcome in ("slow_down", "server_error", "reset", "refused") for r in requests)
    assert any(r.method == "GET" and r.outcome in ("slow_down", "server_error", "reset") for r in requests)

    # The day is complete (CONTRACT §4) and the same as on the healthy store.
    flaky_store = storage.open_store(flaky_store.root, s3.access())  # the proxy is gone: read directly
    assert flaky.input == clean.input and flaky.valid + flaky.rejected == flaky.input
    assert flaky.rows == clean.rows == flaky.valid * len(JUDGES)
    assert flaky.statuses == clean.statuses and flaky.verdicts == clean.verdicts
    for name in ("evaluations", "judge_calls", "rejects", "daily_summary"):
        assert_frame_equal(_table(flaky_store, name), _table(clean_store, name), check_exact=True)
    assert flaky_report == _report(clean_store)
    runs = storage.scan_table(flaky_store, "runs")
    assert runs is not None and runs.select("status").collect()["status"].to_list() == ["success"]
    assert not flaky_store.list(storage.work_prefix(DAY, "r1"))  # staging cleaned up


def test_exists_is_false_only_for_a_missing_object(s3: LocalS3) -> None:
    store = storage.open_store("s3://curated/exists", s3.access())
    store.write_bytes("a.json", b"{}")
    store.write_bytes("c.json.old", b"{}")
    assert store.exists("a.json") and not store.exists("b.json")
    assert not store.exists("c.json") and not store.exists("a.js")  # a longer or shorter key is not the key
    # Every request refused (a reset each time, more than botocore's attempts): an error, not "missing".
    plan = S3FaultPlan(slow_down=0.0, server_error=0.0, reset=1.0, max_faults_per_request=100)
    with FaultyProxy(s3.endpoint_url, plan) as proxy:
        flaky = storage.open_store("s3://curated/exists", _access(proxy.endpoint_url, max_attempts=2))
        with pytest.raises(storage.StorageError, match="cannot check s3://curated/exists/b.json"):
            flaky.exists("b.json")
        assert len(proxy.requests) == 2  # botocore tried twice (max_attempts=2), then gave up
    denied = storage.open_store("s3://no-such-bucket/x", s3.access())
    assert not denied.exists("a.json")  # NoSuchBucket is a 404 too: nothing there


def test_a_query_reads_only_the_partitions_it_can_match(s3: LocalS3) -> None:
    days = [dt.date(2026, 11, d) for d in (1, 2, 3, 4)]
    direct = storage.open_store("s3://curated/pruning", s3.access())
    for day in days:
        frame = pl.DataFrame({"model": ["a", "b"], "score": [0.5, float(day.day)]})
        key = storage.landing_key("evaluations", day, "r1")
        storage.write_parquet(direct, key, frame)
        storage.commit_day(direct, day, "r1", {"evaluations": key})
    with FaultyProxy(s3.endpoint_url, S3FaultPlan(slow_down=0.0, server_error=0.0, reset=0.0)) as proxy:
        store = storage.open_store("s3://curated/pruning", _access(proxy.endpoint_url))
        result = sql.run_sql(store, "SELECT dt, max(score) AS top FROM evaluations WHERE dt = '2026-11-02' GROUP BY dt")
        gets = [r.path.replace("%3D", "=") for r in proxy.requests if r.method == "GET" and "dt" in r.path]
    assert result.rows() == [(days[1], 2.0)]
    # Every day's commit record (small JSON), then only the day asked for, and the newest object,
    # whose footer gives the table's schema.
    assert sorted(p.split("/")[-1] for p in gets if "/_landed/" in p) == [f"dt={d}.json" for d in days]
    assert {p.split("/")[-2] for p in gets if "/evaluations/" in p} == {"dt=2026-11-02", "dt=2026-11-04"}
