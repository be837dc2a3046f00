"""A day is read whole (CONTRACT §3), on a real S3 API (moto on loopback).

A re-run's landing is killed between two uploads: the upload of its second table is refused for
good by a proxy in front of S3, as a task that dies there. Every reader of the project (the
report and its ``summary.json``, which notifications send, with the calibration section; ``sql``;
``compare``; ``latest``) still sees the day landed before, every table of it; a re-run then
converges and leaves no object of the dead landing, and ``gc`` deletes exactly what its dry run
listed. The re-run reads a different day of logs (more records), so each run's day is told apart
by its counts, not only by its ``run_id``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.cli.main import latest_day
from evaluation.compare.compute import landed_rows
from evaluation.contract.comparison import ComparisonSpec
from evaluation.contract.config import Retention
from evaluation.report import build_daily_report
from evaluation.storage import retention, sql
from evaluation.testing import synthetic
from evaluation.testing.s3 import ACCESS_KEY, REGION, SECRET_KEY, LocalS3
from tests.reliability.faulty_proxy import FaultyProxy, S3FaultPlan
from tests.reliability.helpers import DAY, config

FIRST_RECORDS, RERUN_RECORDS = 24, 30
TABLES = storage.DAY_TABLES
NO_FAULTS = S3FaultPlan(slow_down=0.0, server_error=0.0, reset=0.0)
SPEC = ComparisonSpec(start_date=DAY, end_date=DAY, models=["assistant-v2", "assistant-lite"], seed=7, bootstrap=100)


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        for bucket in ("logs", "curated"):
            server.create_bucket(bucket)
        yield server


def _run(tmp_path: Path, run_id: str, output_uri: str, access: storage.S3Access) -> stages.DayResult:
    cfg = config(tmp_path / run_id, run_id=run_id, input_uri="s3://logs/raw", output_uri=output_uri,
                 judge_model="offline/lexical", chunk_size=10, max_reject_ratio=0.5)
    return run_day(cfg, stages.Stores.open(cfg, access))


def _killed_at_second_table(tmp_path: Path, run_id: str, output_uri: str, s3: LocalS3) -> None:
    """Run ``run_id`` through a proxy that refuses, for good, the upload of its ``judge_calls``:
    its landing dies after its rejects, validation result and ``evaluations`` are uploaded."""

    def fail(method: str, path: str) -> tuple[int, str, str] | None:
        hit = method == "PUT" and "/judge_calls/" in path and f"run-{run_id}." in path
        return (403, "AccessDenied", "Access Denied") if hit else None

    with FaultyProxy(s3.endpoint_url, NO_FAULTS, fail=fail) as proxy:
        session = boto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION)
        access = storage.s3_access(session, endpoint_url=proxy.endpoint_url)
        with pytest.raises(storage.StorageError, match=f"cannot write .*judge_calls/dt={DAY}/run-{run_id}.parquet"):
            _run(tmp_path, run_id, output_uri, access)
        assert any(r.outcome == "refused" for r in proxy.requests)


def _views(store: storage.Store) -> dict[str, Any]:
    """What every reader of the project sees of the day."""
    views: dict[str, Any] = {"commit": storage.read_landed(store, [DAY]).commits[DAY].run_id,
                             "latest": latest_day(store, "--date")}
    for table in TABLES:  # the sql command, each table alone
        views[f"sql {table}"] = sql.run_sql(
            store, f"SELECT run_id, count(*) AS n FROM {table} WHERE dt = DATE '{DAY}' GROUP BY run_id").rows()
    # ...and tables joined in one query: the same run's day in both
    views["sql joined"] = sql.run_sql(store, (
        f"SELECT s.run_id, sum(s.rows) AS summed, (SELECT count(*) FROM evaluations e WHERE e.dt = DATE '{DAY}') "
        f"AS counted FROM daily_summary s WHERE s.dt = DATE '{DAY}' GROUP BY s.run_id")).rows()
    _, summary = build_daily_report(store, DAY)  # what summary.json holds and a notification sends
    views["report"] = {
        "run_ids": summary["run"]["run_ids"],
        "groups": sorted((g["model"], g["judge"], g["rows"]) for g in summary["groups"]),
        "totals": {k: summary["totals"][k] for k in ("rows", "records", "rejected")},
        "rejects": summary["rejects"]["total"],
        "worst": sorted(r["record_id"] for r in summary["worst_records"]),
        "calibration": summary["calibration"],
    }
    views["compare"] = landed_rows(store, SPEC)
    return views


def _assert_same(views: dict[str, Any], expected: dict[str, Any]) -> None:
    assert {k: v for k, v in views.items() if k != "compare"} == {k: v for k, v in expected.items() if k != "compare"}
    assert_frame_equal(views["compare"], expected["compare"])


def _assert_one_run(views: dict[str, Any], run_id: str, records: int) -> None:
    assert views["commit"] == run_id and views["latest"] == DAY
    rows = views["sql evaluations"][0][1]
    assert views["sql evaluations"] == [(run_id, rows)] and views["sql judge_calls"][0][0] == run_id
    assert views["sql daily_summary"][0][0] == views["sql rejects"][0][0] == run_id
    assert views["sql joined"] == [(run_id, rows, rows)]
    assert views["report"]["run_ids"] == [run_id] and sum(g[2] for g in views["report"]["groups"]) == rows
    assert views["report"]["totals"]["records"] * 3 == rows == records * 3  # valid × judges (CONTRACT §4)


def _first_landed_then_killed(tmp_path: Path, s3: LocalS3, output_uri: str) -> tuple[storage.Store, dict[str, Any]]:
    raw = storage.open_store("s3://logs/raw", s3.access())
    synthetic.write_day(raw, DAY, FIRST_RECORDS)
    store = storage.open_store(output_uri, s3.access())
    _run(tmp_path, "first", output_uri, s3.access())
    before = _views(store)
    _assert_one_run(before, "first", FIRST_RECORDS)

    synthetic.write_day(raw, DAY, RERUN_RECORDS)  # new logs for the day: the re-run's day differs
    _killed_at_second_table(tmp_path, "second", output_uri, s3)
    return store, before


def test_a_landing_killed_between_two_uploads_leaves_every_reader_on_one_run(s3: LocalS3, tmp_path: Path) -> None:
    store, before = _first_landed_then_killed(tmp_path, s3, "s3://curated/killed")

    # The dead landing's objects are there (engines that glob the folders see them)...
    dead = [storage.landing_key(name, DAY, "second") for name in ("rejects", "validation", "evaluations")]
    objects = {info.key for info in storage.list_day_objects(store, [DAY])}
    assert set(dead) <= objects and not any("run-second" in k for k in objects - set(dead))
    # ...and every reader of the project is on the first run's day, all tables of it, as before.
    _assert_same(_views(store), before)

    # A re-run lands the new day whole, from the ledger; the dead landing's objects, younger than a
    # day (a landing may be under way), are left to gc, and no reader sees them.
    result = _run(tmp_path, "third", "s3://curated/killed", s3.access())
    assert result.valid == RERUN_RECORDS and result.rejected > 0
    after = _views(store)
    _assert_one_run(after, "third", RERUN_RECORDS)
    assert after["sql evaluations"][0][1] > before["sql evaluations"][0][1]
    committed = storage.read_landed(store, [DAY]).commits[DAY].objects
    assert sorted(committed) == sorted(storage.DAY_OBJECTS)
    assert sorted(info.key for info in storage.list_day_objects(store, [DAY])) == sorted([*committed.values(), *dead])
    assert all("run-third." in key for key in committed.values())
    assert sorted(o.key for o in store.list("") if "second" in o.key and not o.key.startswith("_work/")) == sorted(dead)


def test_gc_deletes_the_dead_landing_exactly_as_its_dry_run_listed(s3: LocalS3, tmp_path: Path) -> None:
    store, before = _first_landed_then_killed(tmp_path, s3, "s3://curated/gc")
    dead = {storage.landing_key(name, DAY, "second") for name in ("rejects", "validation", "evaluations")}

    # Objects younger than a day are never listed, whatever work_days: a landing may be under way.
    now = dt.datetime.now(dt.UTC)
    policy = Retention(work_days=0, failed_days=10_000, ledger_days=10_000)
    assert not [g for g in retention.collect(store, policy, now=now + dt.timedelta(hours=20)).groups
                if g.area == "uncommitted"]

    plan = retention.collect(store, policy, now=now + dt.timedelta(days=2))
    assert {g.prefix for g in plan.groups if g.area == "uncommitted"} == dead
    assert {g.area for g in plan.groups} == {"uncommitted", "_work"}  # and the dead run's staging
    lines = retention.describe(plan, applied=False)
    assert all(any(line.startswith(key + "  1 object,") for line in lines) for key in dead)

    listed, everything = set(plan.keys()), {o.key for o in store.list("")}
    assert retention.apply(store, plan) == len(listed)
    assert {o.key for o in store.list("")} == everything - listed
    _assert_same(_views(store), before)  # what readers see did not change
    assert retention.collect(store, policy, now=now + dt.timedelta(days=2)).objects == 0


def test_a_day_landed_before_commit_records_reads_and_a_rerun_replaces_it(s3: LocalS3, tmp_path: Path) -> None:
    """A day landed as ``<table>/dt=D/part-0.parquet`` with no commit record reads as those objects;
    a re-run commits its own and deletes them."""
    raw = storage.open_store("s3://logs/raw", s3.access())
    synthetic.write_day(raw, DAY, FIRST_RECORDS)
    store = storage.open_store("s3://curated/legacy", s3.access())
    _run(tmp_path, "old", store.root, s3.access())
    commit = storage.read_landed(store, [DAY]).commits[DAY]
    for name, key in commit.objects.items():  # as an earlier version laid the day out
        store.copy(key, storage.legacy_key(name, DAY))
    store.delete_keys([*commit.objects.values(), storage.commit_key(DAY)])
    legacy = storage.read_landed(store, [DAY]).commits[DAY]
    assert legacy.run_id is None and legacy.objects == {n: storage.legacy_key(n, DAY) for n in storage.DAY_OBJECTS}
    views = _views(store)
    assert views.pop("commit") is None  # no commit record: the legacy objects are the day
    _assert_one_run({"commit": "old", **views}, "old", FIRST_RECORDS)

    _run(tmp_path, "new", store.root, s3.access())
    _assert_one_run(_views(store), "new", FIRST_RECORDS)
    assert all("run-new." in info.key for info in storage.list_day_objects(store, [DAY]))
    frame = storage.scan_table(store, "evaluations")
    assert frame is not None and frame.select(pl.col("run_id").unique()).collect()["run_id"].to_list() == ["new"]


def test_a_reader_that_read_the_commit_just_before_a_relanding_reads_again(
        s3: LocalS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-run lands the day between a reader's reading of the commit records and its reading of the
    objects they name, and deletes those objects: the read fails on them, and the reader
    (:func:`storage.read_consistently`: ``sql``, ``compare``, the report) reads again with the new
    commit, the re-run's day whole. A read that fails with the records unchanged is not tried again."""
    raw = storage.open_store("s3://logs/raw", s3.access())
    store = storage.open_store("s3://curated/race", s3.access())
    read_landed = storage.read_landed
    runs = iter(["first", "second", "third", "fourth"])
    synthetic.write_day(raw, DAY, FIRST_RECORDS)
    _run(tmp_path, next(runs), store.root, s3.access())
    landings: list[str] = []
    landing = False

    def landed_then_relanded(*args: Any, **kwargs: Any) -> storage.Landed:
        """The commit records as they are, then (once per reader) a re-run of the day lands before the
        reader goes on."""
        nonlocal landing
        found = read_landed(*args, **kwargs)
        if not landing and len(landings) < expected_landings:
            landing = True  # the re-run's own reading of the commit records is left alone
            run_id = next(runs)
            synthetic.write_day(raw, DAY, RERUN_RECORDS if len(landings) % 2 == 0 else FIRST_RECORDS)
            _run(tmp_path, run_id, store.root, s3.access())
            landings.append(run_id)
            landing = False
        return found

    monkeypatch.setattr(storage, "read_landed", landed_then_relanded)  # the package's face, and its callers inside
    monkeypatch.setattr(storage.tables, "read_landed", landed_then_relanded)
    expected_landings = 1
    assert sql.run_sql(store, "SELECT run_id, count(*) FROM evaluations GROUP BY run_id").rows() == [
        ("second", RERUN_RECORDS * 3)]
    expected_landings = 2
    rows = landed_rows(store, SPEC)
    assert rows.height > 0 and set(rows["dt"]) == {DAY}
    assert rows.height == landed_rows_now(store, read_landed) and landings == ["second", "third"]
    expected_landings = 3
    _, summary = build_daily_report(store, DAY)
    assert summary["run"]["run_ids"] == ["fourth"] and summary["totals"]["records"] == RERUN_RECORDS

    calls: list[int] = []

    def broken(landed: storage.Landed) -> None:
        calls.append(1)
        raise ValueError("not a storage race")

    with pytest.raises(ValueError, match="not a storage race"):
        storage.read_consistently(store, [DAY], broken)
    assert calls == [1]


def landed_rows_now(store: storage.Store, read_landed: Any) -> int:
    """The rows the comparison's spec selects of the day as it has landed now (read directly)."""
    frame = storage.scan_table(store, "evaluations", read_landed(store, [DAY]))
    assert frame is not None
    return int(frame.filter(pl.col("model").is_in(SPEC.models)).select(pl.len()).collect().item())
